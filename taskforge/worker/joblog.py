"""The one line a worker logs per run of a job, and at which level.

The level follows what an operator must see: a job that ends dead (from an
exception, a timeout, a lost child or an unknown task) is an ERROR, so
``--log-level warning`` shows every failure; a run whose outcome could not
be recorded is a WARNING, and so is a run that lost its worker (it runs again
without using an attempt); success and a retry still to come are INFO. A
failed run says its run time and the backoff before the next attempt
separately: ``failed after 0.002 s (ValueError: ...); retrying in 1.7 s``.
"""

from __future__ import annotations

import logging
import signal
from typing import TYPE_CHECKING

from ..printable import printable

if TYPE_CHECKING:
    from ..broker.queue import Claim
    from .runner import Outcome

log = logging.getLogger("taskforge.worker")

ERROR_CHARS = 300  # the full error and traceback stay on the job record (`taskforge job ID`)


def seconds(value: float) -> str:
    """A backoff as a person reads it: 0.05, 1.7, 30, 600."""
    return f"{value:.0f}" if value >= 100 else f"{value:.3g}"


def short(error: str) -> str:
    first = error.strip().splitlines()[0] if error.strip() else error
    return printable(first if len(first) <= ERROR_CHARS else first[: ERROR_CHARS - 3] + "...")


def outcome_line(
    task: str,
    job_id: str,
    attempt: str,
    state: str | None,
    duration: float,
    error: str | None = None,
    retry_in: float | None = None,
    *,
    lost: bool = False,
) -> tuple[int, str]:
    """The level and text for one run; ``attempt`` is ``2/3`` (or ``2`` when the maximum is not known).

    ``lost``: the run's process died under it, which uses a worker loss rather than an attempt
    (``max_worker_losses``), so the line says so: "attempt 1/1 ... retrying" would read as a retry the
    job had no attempt left for.
    """
    head = f"task {printable(task)} job {printable(job_id)} attempt {attempt}"
    if state == "succeeded":
        return logging.INFO, f"{head} succeeded in {duration:.3f} s"
    if state == "slept":  # a durable sleep: the job waits, scheduled, with its steps (``CurrentJob.sleep``)
        return logging.INFO, f"{head} sleeping after {duration:.3f} s; the job is scheduled to go on"
    if state == "passed":  # a task of another app's worker: said once per task as a warning (``foreign.py``)
        return logging.DEBUG, f"{head} not run: left for {error}, back in line in {seconds(retry_in or 0)} s"
    failure = f"failed after {duration:.3f} s ({short(error)})" if error else f"ended after {duration:.3f} s"
    if state == "retrying" and lost:
        again = f"back in line in {seconds(retry_in)} s" if retry_in is not None else "back in line"
        return logging.WARNING, f"{head} {failure}; its worker was lost, which uses no attempt: {again}"
    if state == "retrying":
        backoff = f"retrying in {seconds(retry_in)} s" if retry_in is not None else "retrying"
        return logging.INFO, f"{head} {failure}; {backoff}"
    if state == "dead":
        return logging.ERROR, f"{head} {failure}; the job is dead"
    if state == "fenced":
        return logging.WARNING, f"{head} {failure}; not recorded: another worker took the job over"
    if state == "gone":  # the server lost the record (the supervisor says so once, with the count)
        return logging.WARNING, f"{head} {failure}; not recorded: the job's record is gone from Redis"
    return logging.WARNING, f"{head} {failure}; not recorded: its lease will expire and it will be reclaimed"


def describe_exit(code: int | None) -> str:
    """How a child process ended, in words for a log line or a job's error."""
    if code is None:
        return "did not exit"
    if code < 0:
        try:
            return f"was killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


def log_outcome(claim: Claim, outcome: Outcome) -> None:
    """The one line per run (``outcome_line``), built only when someone will read it."""
    if outcome.state != "succeeded" or log.isEnabledFor(logging.INFO):
        attempt = f"{claim.attempts}/{claim.max_attempts}"
        level, text = outcome_line(
            claim.task, claim.id, attempt, outcome.state, outcome.duration, outcome.error, outcome.retry_in
        )
        log.log(level, "%s", text)
