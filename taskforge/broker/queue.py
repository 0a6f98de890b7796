"""The worker's role: claim jobs, record their outcomes, keep their leases.

What a worker calls (``Broker.claims``), and ``app.drain()`` through it.
Thin on purpose: build the call of one Lua script (``calls.py``), run it
(``scripts.py``), and act on its typed reply (``replies.py``). Every state
change is one script, so it is atomic and needs one round trip. The state
machine (every transition, the script that makes it, and the fencing rule
that keeps a late worker from overwriting a newer attempt) and the keyspace
are in ``lua/README.md``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, cast

import redis

from ..errors import error_type_of_kind
from ..job import FailureKind
from . import calls
from .batch_sweep import BatchSweep
from .claims import ClaimVetting
from .compat import block_timeout
from .connection import broker_errors, resends
from .hints import PROMOTE_LIMIT, dequeue_call
from .inspection import PRIORITY_BAND
from .keys import QueueKeys
from .record import Claim, NewJob, new_token
from .replies import ClaimBatch, ExtendResult, FailOutcome, QueueHead, ReclaimResult
from .scripts import denials
from .slots import WakeWaiter, by_slot

if TYPE_CHECKING:
    from .link import Link

__all__ = [
    "PRIORITY_BAND",
    "Claim",
    "ClaimBatch",
    "Claims",
    "NewJob",
    "new_token",
    "priority_of_score",
]

log = logging.getLogger("taskforge.broker")

RECLAIM_LIMIT = 200


def priority_of_score(score: float) -> int:
    return 3 - int(score // PRIORITY_BAND)


class Claims:
    """Claiming: one app's workers' side of its queues. Methods take the queue name."""

    def __init__(self, link: Link) -> None:
        self.client = link.client
        self.url = link.url
        self.scripts = link.scripts
        self.guard = link.guard
        self.retention_ms = link.retention_ms
        self.dead_retention_ms = link.dead_retention_ms
        self.retention_count = link.retention_count
        self.pipelined_wait = link.pipelined_wait
        self.hints = link.hints
        self.tally = link.tally
        self.durability = link.durability
        self.vetting = ClaimVetting(self.fail)
        self._waiters: dict[tuple[str, ...], WakeWaiter] = {}
        self.finish_batches = BatchSweep(self.client, self.scripts, self.guard)

    # -- workers ---------------------------------------------------------

    def dequeue(self, queue: str, lease_ms: int, count: int = 1, token: str | None = None) -> ClaimBatch:
        """Claim up to ``count`` ready jobs.

        Returns the claims and, when there are none, how many seconds until the
        next scheduled job is due (None: nothing scheduled; 0: try again now).
        A job whose body cannot be decoded is dead-lettered here with the
        reason, so the caller never sees it and never crashes on it.

        ``token``: pass the same one again after a call that raised, and the
        jobs that call claimed (if its reply was lost) are handed back rather
        than left orphaned; use a fresh one after a call that answered.

        Every job claimed is charged its attempt; the first starts now, the
        others wait their turn: until ``settle(started=...)`` says one
        started, a reclaim gives it back with the attempt refunded.
        """
        token = token or new_token()
        q = QueueKeys(queue)
        with self.guard(queue):
            flags = self.hints.claim_flags(queue, token)
            sent = resends()
            reply = self.scripts.run(dequeue_call(q, token, lease_ms, count, flags))
            reply = self.hints.recovered(q, token, lease_ms, count, flags, sent, reply)
        self.hints.answered(token)
        if not reply.rows:
            self.tally.flush_when_idle()
        return self.vetting.vetted(queue, token, reply)

    def succeed(self, queue: str, job_id: str, token: str, result: bytes) -> bool:
        """Record success; False when the claim was no longer ours (nothing written)."""
        call = calls.succeed(
            QueueKeys(queue),
            job_id=job_id,
            token=token,
            result=result,
            retention_ms=self.retention_ms,
            retention_count=self.retention_count(queue),
        )
        with self.guard(queue):
            (done, _), acked = self.scripts.write(call)
        if done:
            self.durability.replicated_outcome(job_id, acked)
            self.tally.count_success(queue)
        return done

    def succeed_and_claim(
        self, queue: str, job_id: str, token: str, result: bytes, lease_ms: int, next_token: str
    ) -> tuple[bool, ClaimBatch]:
        """Record success and claim the next job of the same queue in one round trip.

        What a busy worker does between two jobs, halved. Same contract as
        ``succeed`` then ``dequeue(queue, lease_ms, token=next_token)``.
        """
        q = QueueKeys(queue)
        with self.guard(queue):
            flags = self.hints.claim_flags(queue, next_token)
            call = calls.succeed(
                q,
                job_id=job_id,
                token=token,
                result=result,
                retention_ms=self.retention_ms,
                retention_count=self.retention_count(queue),
                next_token=next_token,
                lease_ms=lease_ms,
                promote_limit=PROMOTE_LIMIT,
                **flags.kwargs(),
            )
            sent = resends()
            (done, claimed), acked = self.scripts.write(call)
            assert claimed is not None  # asked for with a next token
            claimed = self.hints.recovered(q, next_token, lease_ms, 1, flags, sent, claimed)
        self.hints.answered(next_token)
        if done:
            self.durability.replicated_outcome(job_id, acked)
            self.tally.count_success(queue)
        return done, self.vetting.vetted(queue, next_token, claimed)

    def settle(
        self,
        queue: str,
        results: Sequence[tuple[str, str, bytes]],
        lease_ms: int = 0,
        next_token: str = "",
        count: int = 1,
        started: Sequence[tuple[str, str]] = (),
    ) -> tuple[list[bool], ClaimBatch | None]:
        """Record several successes, (job id, token, result) each, and with ``next_token`` claim up to
        ``count`` jobs: a batch's outcomes and the next batch in one round trip.

        Per result, as ``succeed``: False when the claim was no longer ours.
        The claim follows ``dequeue``'s token contract. ``started``: (job id,
        token) of jobs of a batch, after its first, that have started since:
        a claim of several jobs charges each its attempt, but a reclaim
        refunds it to those never said to have started (``settle.lua``).
        """
        q = QueueKeys(queue)
        with self.guard(queue):
            flags = self.hints.claim_flags(queue, next_token) if next_token else None
            call = calls.settle(
                q,
                retention_ms=self.retention_ms,
                retention_count=self.retention_count(queue),
                next_token=next_token,
                lease_ms=lease_ms,
                promote_limit=PROMOTE_LIMIT,
                count=count,
                **(flags.kwargs() if flags is not None else {}),
                results=[*results, *((job_id, token, b"") for job_id, token in started)] if started else results,
            )
            sent = resends()
            (done, claimed), acked = self.scripts.write(call)
            if flags is not None:
                assert claimed is not None  # asked for with a next token
                claimed = self.hints.recovered(q, next_token, lease_ms, count, flags, sent, claimed)
        for (job_id, _, _), ok in zip(results, done, strict=True):
            if ok:
                self.durability.replicated_outcome(job_id, acked)
                self.tally.count_success(queue)
        if flags is None or claimed is None:
            return done, None
        self.hints.answered(next_token)
        return done, self.vetting.vetted(queue, next_token, claimed)

    def fail(
        self,
        queue: str,
        job_id: str | bytes,
        token: str,
        error: str,
        traceback: str,
        retry_in: float | None,
        kind: FailureKind = FailureKind.EXCEPTION,
        error_type: str | None = None,
    ) -> FailOutcome:
        """Record a failed run: 'retrying', 'dead', or 'fenced' (claim no longer ours).

        ``retry_in`` None means no retry whatever attempts remain (unknown task,
        corrupt body, no point trying again). ``kind`` is stored beside
        ``error`` in the record's ``failure`` field, ``error_type`` (the class
        path of the error; by default the taskforge error ``kind`` names) in
        its ``error_type`` field.
        """
        call = calls.fail(
            QueueKeys(queue),
            job_id=job_id,
            token=token,
            error=error,
            traceback=traceback,
            retry_delay_ms=None if retry_in is None else max(0, int(retry_in * 1000)),
            dead_retention_ms=self.dead_retention_ms,
            failure=kind,
            error_type=error_type or error_type_of_kind(kind.value),
            retention_count=self.retention_count(queue),
        )
        with self.guard(queue):
            outcome, acked = self.scripts.write(call)
        if outcome is not FailOutcome.FENCED:
            self.durability.replicated_outcome(job_id, acked)
        return outcome

    def adopt(
        self, queue: str, job_id: str, token: str, max_attempts: int, timeout: float | None, max_worker_losses: int = 2
    ) -> bool:
        """Give a job sent by name the options of the worker's task definition (fenced)."""
        timeout_ms = None if timeout is None else int(timeout * 1000)
        call = calls.adopt(
            QueueKeys(queue),
            job_id=job_id,
            token=token,
            max_attempts=max_attempts,
            timeout_ms=timeout_ms,
            max_worker_losses=max_worker_losses,
        )
        with self.guard(queue):
            return self.scripts.run(call)

    def peek(self, queues: Sequence[str]) -> list[QueueHead]:
        """For each queue, in one round trip: (head score or None, seconds to next due or None).

        Promotes due scheduled jobs first, so the head reflects everything ready.
        A lower score is a higher priority (see ``priority_of_score``).
        """
        with self.guard(*queues):
            return self.scripts.run_each([calls.peek(QueueKeys(q), promote_limit=PROMOTE_LIMIT) for q in queues])

    def progress(
        self, queue: str, job_id: str, token: str, fraction: float, message: str | None, meta: bytes = b""
    ) -> bool:
        """Record a running job's progress (fenced); ``meta`` is msgpack, ``b""`` for none."""
        q = QueueKeys(queue)
        call = calls.progress(q, job_id=job_id, token=token, fraction=fraction, message=message, meta=meta)
        with self.guard(queue):
            return self.scripts.run(call)

    def fast_forward(self, queue: str, seconds: float) -> int:
        """Make every job due within ``seconds`` due now (testing: app.drain(advance=...))."""
        with self.guard(queue):
            return self.scripts.run(calls.fast_forward(QueueKeys(queue), advance_ms=int(seconds * 1000)))

    def extend(self, queue: str, lease_ms: int, claims: Iterable[tuple[str, str]]) -> ExtendResult:
        """Renew leases of (id, token) pairs; returns (ids whose claim is lost, ids to abort)."""
        pairs = list(claims)
        if not pairs:
            return ExtendResult([], [])
        with self.guard(queue):
            return self.scripts.run(calls.extend(QueueKeys(queue), lease_ms=lease_ms, claims=pairs))

    def abandon(self, queue: str, job_id: str, token: str) -> bool:
        """Record an aborted job, killed by its supervisor, as cancelled (fenced)."""
        call = calls.abandon(QueueKeys(queue), job_id=job_id, token=token, retention_ms=self.retention_ms)
        with self.guard(queue):
            return self.scripts.run(call)

    def reclaim(self, queue: str) -> ReclaimResult:
        """Return expired claims to the queue: (reclaimed ids, dead ids, dropped ids count)."""
        call = calls.reclaim(
            QueueKeys(queue),
            limit=RECLAIM_LIMIT,
            dead_retention_ms=self.dead_retention_ms,
            retention_ms=self.retention_ms,
        )
        with self.guard(queue):
            reclaimed = self.scripts.run(call)
        self.finish_batches(queue)  # a big enqueue whose producer stopped midway (batch_sweep.py)
        return reclaimed

    def requeue(self, queue: str, job_id: str, token: str, interrupted: str = "") -> bool:
        with self.guard(queue):
            call = calls.requeue(QueueKeys(queue), job_id=job_id, token=token, interrupted=interrupted)
            return self.scripts.run(call)

    def pass_job(self, queue: str, job_id: str, token: str, delay_ms: int, cap_ms: int) -> int:
        """Give a job back unrun for a worker that serves its task: the delay in ms, -1 if fenced."""
        with self.guard(queue):
            return self.scripts.run(
                calls.pass_job(QueueKeys(queue), job_id=job_id, token=token, delay_ms=delay_ms, cap_ms=cap_ms)
            )

    def expire_owner(self, queue: str, owner: str) -> int:
        """Expire now the claims whose token starts with ``owner`` (a worker proved dead): how many."""
        with self.guard(queue):
            return self.scripts.run(calls.expire_owner(QueueKeys(queue), owner=owner))

    def wake_keys(self, queues: Iterable[str]) -> list[str]:
        return [QueueKeys(q).wake for q in queues]

    def wait_for_work(self, queues: Sequence[str], timeout: float) -> bool:
        """Block until an enqueue wakes one of ``queues`` or ``timeout`` passes.

        In a cluster, queues in different slots are waited on side by side
        (see ``WakeWaiter``): one BLPOP cannot span slots.
        """
        self.tally.flush_when_idle()
        wake = self.wake_keys(queues)
        groups = by_slot(self.client, wake)
        with self.guard(*queues):
            if len(groups) == 1:
                return self.client.blpop(wake, timeout=block_timeout(timeout)) is not None
            waiter = self._waiters.get(tuple(queues))
            if waiter is None:
                waiter = self._waiters[tuple(queues)] = WakeWaiter(self.client, groups)
            return waiter.wait(timeout)

    def wait_and_dequeue(self, queue: str, timeout: float, lease_ms: int, token: str) -> ClaimBatch:
        """Block until ``queue`` is woken or ``timeout`` passes, then claim one job: one round trip.

        The dequeue is pipelined behind the blocking pop, and Redis reads a
        client's next command only once its blocking one returns, so a job
        enqueued to an idle worker is claimed the moment it wakes the pop,
        with no second call. Same ``token`` contract as ``dequeue``.
        """
        q = QueueKeys(queue)
        self.tally.flush_when_idle()
        with self.guard(queue):
            flags = self.hints.claim_flags(queue, token)
            call = dequeue_call(q, token, lease_ms, 1, flags)
            sent = resends()
            pipe = self.client.pipeline(transaction=False)
            pipe.blpop([q.wake], timeout=block_timeout(timeout))
            pipe.execute_command(*self.scripts.command(call))
            woke, raw = pipe.execute(raise_on_error=False)
            lost_script = isinstance(raw, redis.exceptions.NoScriptError)  # Redis restarted or flushed its scripts
            for answer in (woke, None if lost_script else raw):
                if isinstance(answer, Exception):
                    with denials(call.name):
                        raise answer
            reply = self.scripts.run(call) if lost_script else call.decode(raw)
            reply = self.hints.recovered(q, token, lease_ms, 1, flags, sent, reply)
        self.hints.answered(token)
        return self.vetting.vetted(queue, token, reply)

    def register_limits(self, queue: str, limits: dict[str, str]) -> None:
        """A worker publishes its tasks' limits ('' = none), so jobs sent by name obey them too."""
        key = QueueKeys(queue).limits
        if any(limits.values()):
            self.hints.knows_limits(queue)
        with self.guard(queue):
            pipe = self.client.pipeline(transaction=False)
            for task, spec in limits.items():
                if spec:
                    pipe.hset(key, task, spec)
                else:
                    pipe.hdel(key, task)
            pipe.execute()

    def job_fields(self, queue: str, job_id: str, names: Sequence[str]) -> list[str | None]:
        """Some fields of a job's hash, decoded (None where missing, or when the key is no hash)."""
        with broker_errors(self.url):
            try:
                raw = cast("list[bytes | None]", self.client.hmget(QueueKeys(queue).job(job_id), list(names)))
            except redis.ResponseError:
                return [None] * len(names)
        return [None if value is None else value.decode(errors="replace") for value in raw]
