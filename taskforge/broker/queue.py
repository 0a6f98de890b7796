"""The queue operations producers, workers and the CLI call.

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

import redis

from ..errors import QueueFull, error_type_of_kind
from ..job import FailureKind
from . import calls
from .claims import ClaimVetting
from .cleanup import Cleanup
from .compat import block_timeout, wait_for_list
from .connection import broker_errors, resends, sent_once
from .durability import FAILOVER_RETRY_S, Durability
from .hints import PROMOTE_LIMIT, ClaimHints
from .inspection import PRIORITY_BAND, Inspection
from .keys import QueueKeys
from .record import Claim, NewJob, new_token
from .replies import (
    AbortOutcome,
    CancelOutcome,
    ClaimBatch,
    EnqueueRefused,
    ExtendResult,
    FailOutcome,
    QueueHead,
    ReclaimResult,
)
from .scaled import is_scaled
from .scripts import Scripts, denials
from .slots import WakeWaiter, by_slot, is_cluster
from .workflows import WorkflowStore

__all__ = [
    "PRIORITY_BAND",
    "Broker",
    "Claim",
    "ClaimBatch",
    "NewJob",
    "new_token",
    "priority_of_score",
]

log = logging.getLogger("taskforge.broker")

RECLAIM_LIMIT = 200


def priority_of_score(score: float) -> int:
    return 3 - int(score // PRIORITY_BAND)


class Broker(ClaimHints, ClaimVetting, Durability, Inspection, Cleanup, WorkflowStore):
    """One app's view of Redis: its client, its scripts, its retention settings.

    Methods take the queue name, so one broker serves every queue of the app.
    """

    def __init__(
        self,
        client: redis.Redis | redis.RedisCluster,
        url: str,
        retention_ms: int,
        dead_retention_ms: int,
        durability: str = "async",
    ) -> None:
        self.client = client
        self.url = url
        self.retention_ms = retention_ms
        self.dead_retention_ms = dead_retention_ms
        self.scripts = Scripts(client, replicated=durability == "replicated")
        self.cluster = is_cluster(client)
        self.failover_retry_s = FAILOVER_RETRY_S if is_scaled(url) else 0.0
        self._known_queues: set[str] = set()
        # fakeredis runs a pipelined BLPOP without blocking, so memory:// waits the plain way.
        self.pipelined_wait = isinstance(client, redis.Redis) and not url.startswith("memory:")
        self._waiters: dict[tuple[str, ...], WakeWaiter] = {}
        self._init_hints()

    # -- producers -------------------------------------------------------

    def enqueue(self, queue: str, jobs: Sequence[NewJob], max_size: int = 0, resend: bool = False) -> list[str]:
        """Store ``jobs`` in ``queue``, all or none; raises QueueFull.

        Returns, per job, its id, or the id of the unfinished job holding its
        unique lock, or '' for a periodic tick some other worker enqueued.
        ``resend``: the ids were chosen by the caller (workflow steps), so an
        id already stored is left alone from the first try on.
        """
        if any(job.limits for job in jobs):
            self.knows_limits(queue)
        q = QueueKeys(queue)
        # The first try may be plain (no "is this id stored already?" check), and is then
        # sent once only; every later one, after an error, is a re-send that checks. A
        # cluster client re-sends on its own, so there every try checks.
        first = self.cluster or resend
        plain, checked = (calls.enqueue(q, max_size=max_size, resend=r, jobs=jobs) for r in (first, True))
        tries = iter([plain])

        def attempt() -> list[str] | EnqueueRefused:
            with sent_once():  # a failed try comes back here, to be re-sent as a checked one
                return self._enqueue_once(next(tries, checked))

        # Three tries at least, as redis-py's own retry of a command used to give.
        reply: list[str] | EnqueueRefused = self._through_failover(attempt, tries=3)
        if not isinstance(reply, EnqueueRefused):
            return reply
        raise QueueFull(
            f"queue {queue!r} holds {reply.size} unfinished jobs and max_size is {max_size}; "
            f"the {'job was' if len(jobs) == 1 else f'{len(jobs)} jobs were'} not stored. "
            "Wait for workers to catch up or raise max_size."
        )

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
        """
        token = token or new_token()
        q = QueueKeys(queue)
        with self.guard(queue):
            flags = self.claim_flags(queue, token)
            sent = resends()
            reply = self.scripts.run(self._dequeue_call(q, token, lease_ms, count, flags))
            reply = self._recovered(q, token, lease_ms, count, flags, sent, reply)
        self.answered(token)
        if not reply.rows:
            self.flush_when_idle()
        return self._vetted(queue, token, reply)

    def succeed(self, queue: str, job_id: str, token: str, result: bytes) -> bool:
        """Record success; False when the claim was no longer ours (nothing written)."""
        call = calls.succeed(
            QueueKeys(queue), job_id=job_id, token=token, result=result, retention_ms=self.retention_ms
        )
        with self.guard(queue):
            (done, _), acked = self.scripts.write(call)
        if done:
            self._replicated_outcome(job_id, acked)
            self.count_success(queue)
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
            flags = self.claim_flags(queue, next_token)
            call = calls.succeed(
                q,
                job_id=job_id,
                token=token,
                result=result,
                retention_ms=self.retention_ms,
                next_token=next_token,
                lease_ms=lease_ms,
                promote_limit=PROMOTE_LIMIT,
                **flags.kwargs(),
            )
            sent = resends()
            (done, claimed), acked = self.scripts.write(call)
            assert claimed is not None  # asked for with a next token
            claimed = self._recovered(q, next_token, lease_ms, 1, flags, sent, claimed)
        self.answered(next_token)
        if done:
            self._replicated_outcome(job_id, acked)
            self.count_success(queue)
        return done, self._vetted(queue, next_token, claimed)

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
        )
        with self.guard(queue):
            outcome, acked = self.scripts.write(call)
        if outcome is not FailOutcome.FENCED:
            self._replicated_outcome(job_id, acked)
        return outcome

    def adopt(self, queue: str, job_id: str, token: str, max_attempts: int, timeout: float | None) -> bool:
        """Give a job sent by name the options of the worker's task definition (fenced)."""
        timeout_ms = None if timeout is None else int(timeout * 1000)
        call = calls.adopt(
            QueueKeys(queue), job_id=job_id, token=token, max_attempts=max_attempts, timeout_ms=timeout_ms
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

    def abort(self, queue: str, job_id: str) -> AbortOutcome:
        """1 cancelled now, 2 running (its worker will stop it), 0 finished, -1 no such job."""
        with self.guard(queue):
            return self.scripts.run(calls.abort(QueueKeys(queue), job_id=job_id, retention_ms=self.retention_ms))

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
            return self.scripts.run(call)

    def requeue(self, queue: str, job_id: str, token: str) -> bool:
        with self.guard(queue):
            return self.scripts.run(calls.requeue(QueueKeys(queue), job_id=job_id, token=token))

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
        self.flush_when_idle()
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
        self.flush_when_idle()
        with self.guard(queue):
            flags = self.claim_flags(queue, token)
            call = self._dequeue_call(q, token, lease_ms, 1, flags)
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
            reply = self._recovered(q, token, lease_ms, 1, flags, sent, reply)
        self.answered(token)
        return self._vetted(queue, token, reply)

    # -- anyone ----------------------------------------------------------

    def ping(self) -> None:
        """Raise BrokerUnavailable now rather than at the first job."""
        with broker_errors(self.url):
            self.client.ping()

    def cancel(self, queue: str, job_id: str) -> CancelOutcome:
        """1 cancelled, 0 too late (running or finished), -1 no such job."""
        with self.guard(queue):
            return self.scripts.run(calls.cancel(QueueKeys(queue), job_id=job_id, retention_ms=self.retention_ms))

    def await_state(self, queue: str, job_id: str) -> str | None:
        with self.guard(queue):
            return self.scripts.run(calls.await_state(QueueKeys(queue), job_id=job_id))

    def wait_done(self, queue: str, job_id: str, timeout: float) -> bool:
        """Block until the job's done list exists; non-destructive so many may wait."""
        key = QueueKeys(queue).done(job_id)
        with self.guard(queue):
            return wait_for_list(self.client, key, timeout)

    def register_limits(self, queue: str, limits: dict[str, str]) -> None:
        """A worker publishes its tasks' limits ('' = none), so jobs sent by name obey them too."""
        key = QueueKeys(queue).limits
        if any(limits.values()):
            self.knows_limits(queue)
        with self.guard(queue):
            pipe = self.client.pipeline(transaction=False)
            for task, spec in limits.items():
                if spec:
                    pipe.hset(key, task, spec)
                else:
                    pipe.hdel(key, task)
            pipe.execute()
