"""Record what happened to the jobs of a child that died, killed or crashed.

A child records its own jobs; when it dies mid-job the supervisor must do
it instead: a timeout fails the attempt (retry or dead by the usual rules),
a crash uses one of the job's worker losses instead (``max_worker_losses``:
dead as ``WorkerLost`` once they are spent), an abort records the job
cancelled, a run a shutdown's grace cut short goes back recorded as
interrupted, and a job killed for someone else's sake (another lane's
timeout) goes back to its queue unrun. During an outage these outcomes wait here, their leases still
renewed (``held``), and are retried every tick without blocking the loop.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING

import redis

from ..errors import BrokerUnavailable, CorruptQueue, TaskforgeError
from ..finals import FinalTransition
from ..handle import JobHandle
from ..job import FailureKind
from ..printable import printable
from .joblog import describe_exit, outcome_line
from .pool import Died, Running
from .runner import notify_failure, retry_delay

if TYPE_CHECKING:
    from ..app import TaskForge
    from ..metrics import WorkerMetrics

log = logging.getLogger("taskforge.worker")
INTERRUPTED = "Interrupted: the worker stopped (SIGTERM or SIGINT) and its grace ran out before the run ended"


class PendingOutcomes:
    """Jobs whose child ended before recording them, until their outcome is written."""

    def __init__(self, app: TaskForge, metrics: WorkerMetrics | None = None) -> None:
        self.app = app
        self.metrics = metrics
        self.unsettled: list[Died] = []

    def __bool__(self) -> bool:
        return bool(self.unsettled)

    def __len__(self) -> int:
        return len(self.unsettled)

    def held(self) -> list[Running]:
        """Their claims are still this worker's, to renew until recorded."""
        return [running for running, _ in self.unsettled]

    def add(self, died: Iterable[Died]) -> None:
        self.unsettled.extend(died)

    def drop(self) -> None:
        """A shutdown past its grace period gives up: the leases expire and the jobs are reclaimed."""
        if self.unsettled:
            log.warning(
                "%d job outcomes not recorded before shutdown; their leases will expire and they will be reclaimed",
                len(self.unsettled),
            )
        self.unsettled = []

    def settle(self) -> None:
        """Try to record each outcome once; keep those an outage prevented, for the next tick."""
        still = []
        for running, code in self.unsettled:
            try:
                self.record(running, code)
            except BrokerUnavailable:
                still.append((running, code))
            except (CorruptQueue, redis.RedisError) as exc:
                log.error(
                    "cannot record the outcome of %s (%s); its lease will expire and it will be reclaimed",
                    running.job.job_id,
                    exc,
                )
        self.unsettled = still

    def record(self, running: Running, code: int | None) -> None:
        broker = self.app.broker
        if running.give_back:
            why = INTERRUPTED if running.interrupted else ""
            broker.claims.requeue(running.job.queue, running.job.job_id, running.job.token, why)
            how = "interrupted" if why else "unrun"
            log.info("%s %s went back to its queue %s", printable(running.job.task), printable(running.job.job_id), how)
            return
        if running.outcome_unknown:
            self.lost_with_child(running, code)
            return
        if running.aborted:
            broker.claims.abandon(running.job.queue, running.job.job_id, running.job.token)
            log.info("%s %s aborted: its child was stopped", printable(running.job.task), printable(running.job.job_id))
            self.app.finals.ended(broker, FinalTransition(running.job.queue, running.job.job_id, "cancelled"))
            return
        if running.timed_out:
            error = f"TimeoutError: the job ran longer than its timeout of {running.job.timeout:g} s and was killed"
            kind = FailureKind.TIMEOUT
        else:
            error = f"WorkerCrashed: the child process running this job {describe_exit(code)}"
            kind = FailureKind.CRASHED
        self.fail(running, error, kind)

    def lost_with_child(self, running: Running, code: int | None) -> None:
        """A job of a batch run before its child died: recorded already (fenced here, said nowhere), or
        its success died with the child: then it runs again now, as its lease ending would have had it."""
        job = running.job
        error = f"WorkerCrashed: the child process {describe_exit(code)} before this run's success was recorded"
        if self.app.broker.claims.job_fields(job.queue, job.job_id, ["token"]) == [job.token]:
            self.fail(running, error, FailureKind.CRASHED)

    def fail(self, running: Running, error: str, kind: FailureKind) -> None:
        """Retry or dead (a timeout uses an attempt, a crash a worker loss: fail.lua), then the same metrics and
        hooks as a failure in the child."""
        job = running.job
        delay = retry_delay(self.app, job.task, job.attempts)
        state = self.app.broker.claims.fail(job.queue, job.job_id, job.token, error, "", delay, kind)
        if state == "dead" and kind is FailureKind.CRASHED:  # its worker losses spent: fail.lua wrote WorkerLost
            error = self.app.broker.claims.job_fields(job.queue, job.job_id, ["error"])[0] or error
            kind = FailureKind.WORKER_LOST
        if state == "dead":  # the record says why: the listeners read it there
            self.app.finals.ended(self.app.broker, FinalTransition(job.queue, job.job_id, "dead"))
        duration = time.monotonic() - running.started
        if state in ("retrying", "dead"):  # a timeout's run time belongs in the p95; its wait is unknown here
            self.app.broker.claims.tally.time_run(job.queue, job.task, None, duration)
            self.app.broker.claims.tally.flush_outcomes()  # the supervisor has no idle wait that would write it
        if self.metrics is not None:
            self.metrics.finished(job.queue, job.task, state, duration)
        attempt = f"{job.attempts}/{job.max_attempts}" if job.max_attempts else str(job.attempts)
        level, text = outcome_line(
            job.task, job.job_id, attempt, state, duration, error, delay, lost=kind is FailureKind.CRASHED
        )
        log.log(level, "%s", text)
        if self.app.hooks.handlers["job_failed"] or self.app.hooks.handlers["job_dead"]:
            with contextlib.suppress(TaskforgeError):
                info = JobHandle(self.app, job.job_id, job.queue).info()
                notify_failure(self.app, info, state, error, kind=kind)
