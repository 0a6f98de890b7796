"""Run one claimed job: look up, call, catch, record.

Recording is retried through Redis outages, so the outcome of a job that
finished while Redis was away is written once Redis is back (or, if the
lease ran out meanwhile and another worker took the job, fenced off).
"""

from __future__ import annotations

import logging
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import redis

from ..broker.queue import Claim
from ..errors import BrokerUnavailable, Retry, SerializationError
from ..serialization import dumps_result

if TYPE_CHECKING:
    from ..app import TaskForge

log = logging.getLogger("taskforge.worker")

RECORD_BACKOFF_CAP = 5.0
RECORD_ATTEMPTS_ON_ERROR = 3


@dataclass(frozen=True)
class Outcome:
    """What happened to one run; ``state`` is what the queue said after recording."""

    state: str | None  # succeeded | retrying | dead | fenced | None (not recorded: lease will expire)
    duration: float
    error: str | None = None
    # When the caller asked to chain: what claiming the next job returned.
    next: tuple[list[Claim], float | None] | None = None


@dataclass(frozen=True)
class Chain:
    """Ask run_claim to claim the next job in the same call that records success."""

    lease_ms: int
    token: str


def retry_delay(app: TaskForge, task_name: str, attempt: int, requested: float | None = None) -> float:
    """Seconds before the next attempt: what the task asked for, else its backoff policy."""
    if requested is not None:
        return requested
    task = app.tasks.get(task_name)
    if task is None:
        return 1.0
    return max(0.0, float(task.backoff(attempt)))


def record(call: Any, *args: Any, stop: Any = None) -> Any:
    """Call a broker method until Redis answers; ``stop()`` true gives up (returns None).

    An outage is waited out. Any other Redis error (the job's record was
    overwritten by something else, say) is tried a few times and then given
    up: the claim's lease then expires and the job is reclaimed, not lost.
    """
    delay = 0.05
    errors = 0
    while True:
        try:
            return call(*args)
        except BrokerUnavailable as exc:
            if stop is not None and stop():
                return None
            log.warning("%s; retrying in %.1f s", exc, delay)
        except redis.RedisError as exc:
            errors += 1
            if errors >= RECORD_ATTEMPTS_ON_ERROR:
                log.error("giving up on %s after %d errors (%s); the lease will expire and the job "
                          "will be reclaimed", getattr(call, "__name__", call), errors, exc)
                return None
            log.warning("%s: %s; retrying in %.1f s", getattr(call, "__name__", call), exc, delay)
        time.sleep(delay)
        delay = min(delay * 2, RECORD_BACKOFF_CAP)


def run_claim(app: TaskForge, claim: Claim, chain: Callable[[], Chain | None] | None = None) -> Outcome:
    """Run ``claim`` and record its outcome; ``chain()`` is asked, once the task has
    returned, whether to claim the next job in the same call (a shutdown may
    have begun while the task ran)."""
    broker = app.broker
    started = time.monotonic()
    task = app.tasks.get(claim.task)
    if task is None:
        known = ", ".join(sorted(app.tasks)) or "none"
        error = (
            f"UnknownTask: no task named {claim.task!r} is registered in app {app.name!r} "
            f"(known: {known}); deploy the code that defines it, then retry the dead job"
        )
        state = record(broker.fail, claim.queue, claim.id, claim.token, error, "", None)
        return Outcome(state, time.monotonic() - started, error)
    try:
        value = task.func(*claim.args, **claim.kwargs)
    except Retry as request:
        error = f"Retry: {request}"
        delay = retry_delay(app, claim.task, claim.attempts, request.after)
        state = record(broker.fail, claim.queue, claim.id, claim.token, error, "", delay)
        return Outcome(state, time.monotonic() - started, error)
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}"
        tb = traceback.format_exc()
        delay = retry_delay(app, claim.task, claim.attempts)
        state = record(broker.fail, claim.queue, claim.id, claim.token, error, tb, delay)
        return Outcome(state, time.monotonic() - started, error)
    duration = time.monotonic() - started
    try:
        result = dumps_result(value)
        if app.max_job_size and len(result) > app.max_job_size:
            raise SerializationError(
                f"the task's return value serializes to {len(result):,} bytes, over the "
                f"max_job_size of {app.max_job_size:,}; store big results elsewhere and return a reference"
            )
    except SerializationError as exc:
        error = f"SerializationError: {exc}"
        state = record(broker.fail, claim.queue, claim.id, claim.token, error, "", None)
        return Outcome(state, duration, error)
    link = chain() if chain is not None else None
    if link is None:
        ok = record(broker.succeed, claim.queue, claim.id, claim.token, result)
        return Outcome({True: "succeeded", False: "fenced"}.get(ok), duration)
    answer = record(broker.succeed_and_claim, claim.queue, claim.id, claim.token, result, link.lease_ms,
                    link.token)
    if answer is None:
        return Outcome(None, duration)
    ok, following = answer
    return Outcome("succeeded" if ok else "fenced", duration, next=following)
