"""The producer's role: store jobs, follow them, cancel or abort them.

What a ``Task`` and a ``JobHandle`` call (``Broker.jobs``). Every state
change is one Lua script (``calls.py`` builds it, ``scripts.py`` runs it),
so it is atomic and one round trip. ``AsyncJobs`` (``aio.py``) is this
role's awaited twin: the same methods over the same calls
(``roles.JobsRole`` and ``aio_roles.AsyncJobsRole``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from . import batches, calls, job_plans
from .connection import sent_once
from .drivers import drive
from .job_plans import queue_full as queue_full  # the error of a refused enqueue, sync and async
from .keys import QueueKeys
from .record import NewJob
from .replies import AbortOutcome, CancelOutcome, EnqueueRefused
from .stream_reads import StreamRead

if TYPE_CHECKING:
    from .link import Link


class Jobs:
    """Producing: one app's jobs in and out of its queues. Methods take the queue name."""

    def __init__(self, link: Link) -> None:
        self.link = link
        self.client = link.client
        self.url = link.url
        self.scripts = link.scripts
        self.guard = link.guard
        self.cluster = link.cluster
        self.retention_ms = link.retention_ms
        self.hints = link.hints
        self.durability = link.durability
        self.settings = link.settings

    def enqueue(self, queue: str, jobs: Sequence[NewJob], max_size: int = 0, resend: bool = False) -> list[str]:
        """Store ``jobs`` in ``queue``, all or none; raises QueueFull.

        Returns, per job, its id, or the id of the unfinished job holding its
        unique lock, or '' for a periodic tick some other worker enqueued.
        ``resend``: the ids were chosen by the caller (workflow steps), so an
        id already stored is left alone from the first try on.
        """
        if any(job.limits or job.key_limits for job in jobs):
            self.hints.knows_limits(queue)
        parts = batches.split(jobs)
        if parts is not None:  # too big for one call within the time budget
            return self._enqueue_sliced(batches.Batch(queue, parts, max_size))
        q = QueueKeys(queue)
        # The first try may be plain (no "is this id stored already?" check), and is then
        # sent once only; every later one, after an error, is a re-send that checks. A
        # cluster client re-sends on its own, so there every try checks.
        first = self.cluster or resend
        tries = iter([calls.enqueue(q, max_size=max_size, resend=first, jobs=jobs)])

        def attempt() -> list[str] | EnqueueRefused:
            # The checked call is built only when a try failed (the hot path sends one call).
            call = next(tries, None) or calls.enqueue(q, max_size=max_size, resend=True, jobs=jobs)
            with sent_once():  # a failed try comes back here, to be re-sent as a checked one
                return self.durability.enqueue_once(call)

        # Three tries at least, as redis-py's own retry of a command used to give.
        reply: list[str] | EnqueueRefused = self.durability.through_failover(attempt, tries=3)
        if not isinstance(reply, EnqueueRefused):
            return reply
        raise queue_full(queue, reply.size, max_size, len(jobs))

    def _enqueue_sliced(self, batch: batches.Batch) -> list[str]:
        """``enqueue`` of a big batch: staged slice by slice, then committed slice by slice (``job_plans``)."""
        return drive(self.link, job_plans.enqueue_sliced(self.settings, batch))

    def read(self, queue: str, job_id: str) -> dict[bytes, bytes] | None:
        """The raw job hash, or None when there is no such job."""
        return drive(self.link, job_plans.read(queue, job_id))

    def queues(self) -> list[str]:
        """Every queue name ever enqueued to through any app on this Redis."""
        return drive(self.link, job_plans.queues())

    def cancel(self, queue: str, job_id: str) -> CancelOutcome:
        """1 cancelled, 0 too late (running or finished), -1 no such job."""
        return drive(self.link, job_plans.cancel(queue, job_id, self.retention_ms))

    def abort(self, queue: str, job_id: str) -> AbortOutcome:
        """1 cancelled now, 2 running (its worker will stop it), 0 finished, -1 no such job."""
        return drive(self.link, job_plans.abort(queue, job_id, self.retention_ms))

    def await_state(self, queue: str, job_id: str) -> str | None:
        return drive(self.link, job_plans.await_state(queue, job_id))

    def wait_done(self, queue: str, job_id: str, timeout: float) -> bool:
        """Block until the job's done list exists; non-destructive so many may wait."""
        return drive(self.link, job_plans.wait_done(queue, job_id, timeout))

    def read_stream(self, queue: str, job_id: str, after: str, block: float) -> StreamRead:
        """The job's stream items after entry ``after``, waiting up to ``block`` s for one (0: not at all);
        when none came, the job's state then."""
        return drive(self.link, job_plans.read_stream(queue, job_id, after, block))
