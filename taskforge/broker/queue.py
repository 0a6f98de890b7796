"""The queue operations producers, workers and the CLI call.

Thin on purpose: encode arguments, call one Lua script, decode the answer.
Every state change is one script, so it is atomic and needs one round trip.

State machine (one row per transition, and the script that performs it)::

    from                 to                  script        when
    (new)                pending|scheduled   enqueue       delay(), apply_at(), delay_many()
    scheduled|retrying   pending             dequeue       its due time has come (promotion)
    pending              running             dequeue       a worker claims it (attempts += 1)
    running              succeeded           succeed       the task returned (fenced by token)
    running              retrying            fail          it raised and attempts remain
    running              dead                fail          it raised with no attempts left, or
                                                           cannot run (unknown task, corrupt body,
                                                           junk state or attempts in its record)
    running              pending             reclaim       its lease expired (worker died);
                                                           the lost attempt counts
    running              dead                reclaim       lease expired on the last attempt
    running              pending             requeue       graceful shutdown; attempt refunded
    pending|scheduled|   cancelled           cancel        JobHandle.cancel()
      retrying
    dead                 pending             retry_dead    taskforge dead retry
    pending|scheduled|   (deleted)           purge         taskforge purge / dead purge
      dead

Claims carry a fresh random token; succeed, fail, extend and requeue do
nothing unless the token still matches, so a worker whose lease was reclaimed
can never overwrite the outcome of the attempt that replaced it.
"""

from __future__ import annotations

import json
import logging
import secrets
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import redis

from ..errors import CorruptPayload, QueueFull
from ..serialization import loads_call
from .compat import block_timeout, wait_for_list
from .connection import broker_errors
from .durability import FAILOVER_RETRY_S, Durability
from .inspection import PRIORITY_BAND, Inspection
from .keys import QueueKeys
from .scaled import is_scaled
from .scripts import Scripts, denied_in_script
from .slots import WakeWaiter, by_slot, is_cluster, script_per_node

log = logging.getLogger("taskforge.broker")

PROMOTE_LIMIT = 200
RECLAIM_LIMIT = 200
PURGE_SLICE = 500


@dataclass(frozen=True)
class NewJob:
    """A job as the producer hands it to ``enqueue``: already serialized."""

    id: str
    task: str
    payload: bytes
    priority: int
    max_attempts: int
    timeout_ms: int | None = None
    due_ms: int | None = None  # absolute, producer's clock (apply_at)
    delay_ms: int = 0  # relative, resolved on Redis's clock (apply_in, retries)
    inherit: bool = False  # sent by name: the worker's task definition supplies max_attempts, timeout
    limits: str = ""  # "rate:period_ms:concurrency" for a rate- or concurrency-limited task
    unique_key: str = ""  # the full lock key of a unique job
    lock_ttl_ms: int = 0  # TTL of the unique lock or periodic tick key
    tick_key: str = ""  # the full key of a periodic tick: enqueued once across all workers


@dataclass(frozen=True)
class Claim:
    """A job a worker now owns until its lease runs out or it reports back."""

    id: str
    queue: str
    token: str
    task: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    attempts: int
    max_attempts: int
    timeout: float | None
    priority: int
    inherit: bool = False


def priority_of_score(score: float) -> int:
    return 3 - int(score // PRIORITY_BAND)


def new_token() -> str:
    return secrets.token_hex(8)


def _int(value: bytes | int | None, default: int = 0) -> int:
    try:
        return int(value) if value not in (None, b"") else default  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return default


def _timeout(value: bytes | None) -> float | None:
    """Seconds, or None: no field, junk, or a value no task option can produce (zero or less).

    A negative timeout written by something else would have the supervisor
    kill the child at once, whatever job it had moved on to.
    """
    ms = _int(value)
    return ms / 1000 if ms > 0 else None


class Broker(Durability, Inspection):
    """One app's view of Redis: its client, its scripts, its retention settings.

    Methods take the queue name, so one broker serves every queue of the app.
    """

    def __init__(
        self,
        client: redis.Redis,
        url: str,
        retention_ms: int,
        dead_retention_ms: int,
        durability: str = "async",
    ) -> None:
        self.client = client
        self.replicated = durability == "replicated"
        self.url = url
        self.retention_ms = retention_ms
        self.dead_retention_ms = dead_retention_ms
        self.scripts = Scripts(client)
        self.cluster = is_cluster(client)
        self.failover_retry_s = FAILOVER_RETRY_S if is_scaled(url) else 0.0
        self._known_queues: set[str] = set()
        # fakeredis runs a pipelined BLPOP without blocking, so memory:// waits the plain way.
        self.pipelined_wait = isinstance(client, redis.Redis) and not url.startswith("memory:")
        self._waiters: dict[tuple[str, ...], WakeWaiter] = {}

    # -- producers -------------------------------------------------------

    def enqueue(self, queue: str, jobs: Sequence[NewJob], max_size: int = 0) -> list[str]:
        """Store ``jobs`` in ``queue``, all or none; raises QueueFull.

        Returns, per job, its id, or the id of the unfinished job holding its
        unique lock, or '' for a periodic tick some other worker enqueued.
        """
        q = QueueKeys(queue)
        args: list[Any] = [max_size, len(jobs)]
        for job in jobs:
            meta = [
                job.id,
                job.task,
                job.priority,
                job.max_attempts,
                "" if job.timeout_ms is None else job.timeout_ms,
                "" if job.due_ms is None else job.due_ms,
                job.delay_ms,
                "1" if job.inherit else "",
                job.limits,
                job.unique_key,
                job.lock_ttl_ms,
                job.tick_key,
            ]
            args += [json.dumps(meta, separators=(",", ":")), job.payload]
        reply = self._through_failover(lambda: self._enqueue_once(q, args))
        if reply[0] == b"OK":
            return [i.decode() for i in reply[1:]]
        size = reply[1]
        raise QueueFull(
            f"queue {queue!r} holds {int(size)} unfinished jobs and max_size is {max_size}; "
            f"the {'job was' if len(jobs) == 1 else f'{len(jobs)} jobs were'} not stored. "
            "Wait for workers to catch up or raise max_size."
        )

    # -- workers ---------------------------------------------------------

    def dequeue(
        self, queue: str, lease_ms: int, count: int = 1, token: str | None = None
    ) -> tuple[list[Claim], float | None]:
        """Claim up to ``count`` ready jobs.

        Returns the claims and, when there are none, how many seconds until the
        next scheduled job is due (None: nothing scheduled; 0: try again now).
        A job whose body cannot be decoded is dead-lettered here with the
        reason, so the caller never sees it and never crashes on it.

        ``token``: pass the same one again after a call that raised, and the
        jobs that call claimed (if its reply was lost) are handed back rather
        than left orphaned; use a fresh one after a call that answered.
        """
        q = QueueKeys(queue)
        token = token or new_token()
        with self.guard(queue):
            raw = self.scripts.call("dequeue", q, token, lease_ms, PROMOTE_LIMIT, count, self.dead_retention_ms)
        return self._claimed(queue, token, raw)

    def _claimed(self, queue: str, token: str, raw: list[Any]) -> tuple[list[Claim], float | None]:
        """Decode what claim_ready (lua/_lib.lua) returned; see ``dequeue``."""
        claims: list[Claim] = []
        if int(raw[0]):
            log.warning(
                "dropped %d ids without a job record from %s (deleted or expired by something else)", int(raw[0]), queue
            )
        rows = raw[2:]
        for i in range(0, len(rows), 9):
            raw_id, task, payload, attempts, max_attempts, timeout, priority, inherit, damage = rows[i : i + 9]
            try:
                job_id = raw_id.decode()
            except UnicodeDecodeError:
                # Job ids are str everywhere else (handles, hooks, the supervisor's messages).
                self.fail(
                    queue,
                    raw_id,
                    token,
                    f"CorruptJob: the job id {raw_id[:60]!r} is not UTF-8 text, "
                    "so no worker can report on it; it was dead-lettered, not run",
                    "",
                    None,
                )
                continue
            if damage:
                field, _, value = damage.decode(errors="replace").partition(" ")
                self.fail(
                    queue,
                    job_id,
                    token,
                    f"CorruptJob: its {field} field holds {value[:60]!r}, which "
                    "taskforge never writes; it was dead-lettered, not run",
                    "",
                    None,
                )
                continue
            try:
                if not task:
                    raise CorruptPayload("the job record has no task name")
                args, kwargs = loads_call(payload)
            except CorruptPayload as exc:
                self.fail(queue, job_id, token, f"CorruptPayload: {exc}", "", None)
                continue
            claims.append(
                Claim(
                    id=job_id,
                    queue=queue,
                    token=token,
                    task=task.decode(errors="replace"),
                    args=args,
                    kwargs=kwargs,
                    attempts=_int(attempts),
                    max_attempts=_int(max_attempts, 1),
                    timeout=_timeout(timeout),
                    priority=_int(priority, 1),
                    inherit=bool(inherit),
                )
            )
        if claims:
            return claims, None
        wait_ms = int(raw[1])
        if len(rows) > 0:  # claimed only corrupt jobs: more may be ready
            return [], 0.0
        return [], (None if wait_ms < 0 else wait_ms / 1000)

    def succeed(self, queue: str, job_id: str, token: str, result: bytes) -> bool:
        """Record success; False when the claim was no longer ours (nothing written)."""
        with self.guard(queue):
            reply, acked = self._write("succeed", QueueKeys(queue), job_id, token, result, self.retention_ms)
        done = bool(reply)
        if done:
            self._replicated_outcome(job_id, acked)
        return done

    def succeed_and_claim(
        self, queue: str, job_id: str, token: str, result: bytes, lease_ms: int, next_token: str
    ) -> tuple[bool, tuple[list[Claim], float | None]]:
        """Record success and claim the next job of the same queue in one round trip.

        What a busy worker does between two jobs, halved. Same contract as
        ``succeed`` then ``dequeue(queue, lease_ms, token=next_token)``.
        """
        with self.guard(queue):
            raw, acked = self._write(
                "succeed",
                QueueKeys(queue),
                job_id,
                token,
                result,
                self.retention_ms,
                next_token,
                lease_ms,
                PROMOTE_LIMIT,
                self.dead_retention_ms,
            )
        done = bool(raw[0])
        if done:
            self._replicated_outcome(job_id, acked)
        return done, self._claimed(queue, next_token, raw[1:])

    def fail(
        self,
        queue: str,
        job_id: str | bytes,
        token: str,
        error: str,
        traceback: str,
        retry_in: float | None,
    ) -> str:
        """Record a failed run: 'retrying', 'dead', or 'fenced' (claim no longer ours).

        ``retry_in`` None means no retry whatever attempts remain (unknown task,
        corrupt body, no point trying again).
        """
        delay_ms = -1 if retry_in is None else max(0, int(retry_in * 1000))
        with self.guard(queue):
            code, acked = self._write(
                "fail", QueueKeys(queue), job_id, token, error, traceback, delay_ms, self.dead_retention_ms
            )
        if code:
            self._replicated_outcome(job_id, acked)
        return {0: "fenced", 1: "retrying", 2: "dead"}[int(code)]

    def adopt(self, queue: str, job_id: str, token: str, max_attempts: int, timeout: float | None) -> bool:
        """Give a job sent by name the options of the worker's task definition (fenced)."""
        timeout_ms = "" if timeout is None else int(timeout * 1000)
        with self.guard(queue):
            return bool(self.scripts.call("adopt", QueueKeys(queue), job_id, token, max_attempts, timeout_ms))

    def peek(self, queues: Sequence[str]) -> list[tuple[float | None, float | None]]:
        """For each queue, in one round trip: (head score or None, seconds to next due or None).

        Promotes due scheduled jobs first, so the head reflects everything ready.
        A lower score is a higher priority (see ``priority_of_score``).
        """
        calls = [([q.pending], [q.prefix, PROMOTE_LIMIT]) for q in map(QueueKeys, queues)]
        with self.guard(*queues):
            replies = script_per_node(self.client, self.scripts.script("peek"), calls)
        out: list[tuple[float | None, float | None]] = []
        for head, wait in replies:
            head_score = float(head)
            out.append((None if head_score < 0 else head_score, None if int(wait) < 0 else int(wait) / 1000))
        return out

    def progress(self, queue: str, job_id: str, token: str, fraction: float, message: str | None) -> bool:
        with self.guard(queue):
            return bool(self.scripts.call("progress", QueueKeys(queue), job_id, token, repr(fraction), message or ""))

    def fast_forward(self, queue: str, seconds: float) -> int:
        """Make every job due within ``seconds`` due now (testing: app.drain(advance=...))."""
        with self.guard(queue):
            return int(self.scripts.call("fast_forward", QueueKeys(queue), int(seconds * 1000)))

    def extend(self, queue: str, lease_ms: int, claims: Iterable[tuple[str, str]]) -> tuple[list[str], list[str]]:
        """Renew leases of (id, token) pairs; returns (ids whose claim is lost, ids to abort)."""
        flat = [value for pair in claims for value in pair]
        if not flat:
            return [], []
        with self.guard(queue):
            raw = [i.decode() for i in self.scripts.call("extend", QueueKeys(queue), lease_ms, *flat)]
        cut = raw.index("|")
        return raw[:cut], raw[cut + 1 :]

    def abort(self, queue: str, job_id: str) -> int:
        """1 cancelled now, 2 running (its worker will stop it), 0 finished, -1 no such job."""
        with self.guard(queue):
            return int(self.scripts.call("abort", QueueKeys(queue), job_id, self.retention_ms))

    def abandon(self, queue: str, job_id: str, token: str) -> bool:
        """Record an aborted job, killed by its supervisor, as cancelled (fenced)."""
        with self.guard(queue):
            return bool(self.scripts.call("abandon", QueueKeys(queue), job_id, token, self.retention_ms))

    def reclaim(self, queue: str) -> tuple[list[str], list[str], int]:
        """Return expired claims to the queue: (reclaimed ids, dead ids, dropped ids count)."""
        with self.guard(queue):
            raw = self.scripts.call(
                "reclaim", QueueKeys(queue), RECLAIM_LIMIT, self.dead_retention_ms, self.retention_ms
            )
        first = raw.index(b"|")
        second = raw.index(b"|", first + 1)
        back = [i.decode(errors="replace") for i in raw[:first]]
        buried = [i.decode(errors="replace") for i in raw[first + 1 : second]]
        return back, buried, int(raw[second + 1])

    def requeue(self, queue: str, job_id: str, token: str) -> bool:
        with self.guard(queue):
            return bool(self.scripts.call("requeue", QueueKeys(queue), job_id, token))

    def wake_keys(self, queues: Iterable[str]) -> list[str]:
        return [QueueKeys(q).wake for q in queues]

    def wait_for_work(self, queues: Sequence[str], timeout: float) -> bool:
        """Block until an enqueue wakes one of ``queues`` or ``timeout`` passes.

        In a cluster, queues in different slots are waited on side by side
        (see ``WakeWaiter``): one BLPOP cannot span slots.
        """
        wake = self.wake_keys(queues)
        groups = by_slot(self.client, wake)
        with self.guard(*queues):
            if len(groups) == 1:
                return self.client.blpop(wake, timeout=block_timeout(timeout)) is not None
            waiter = self._waiters.get(tuple(queues))
            if waiter is None:
                waiter = self._waiters[tuple(queues)] = WakeWaiter(self.client, groups)
            return waiter.wait(timeout)

    def wait_and_dequeue(
        self, queue: str, timeout: float, lease_ms: int, token: str
    ) -> tuple[list[Claim], float | None]:
        """Block until ``queue`` is woken or ``timeout`` passes, then claim one job: one round trip.

        The dequeue is pipelined behind the blocking pop, and Redis reads a
        client's next command only once its blocking one returns, so a job
        enqueued to an idle worker is claimed the moment it wakes the pop,
        with no second call. Same ``token`` contract as ``dequeue``.
        """
        q = QueueKeys(queue)
        with self.guard(queue):
            pipe = self.client.pipeline(transaction=False)
            pipe.blpop([q.wake], timeout=block_timeout(timeout))
            pipe.execute_command(
                "EVALSHA", self.scripts.script("dequeue").sha, 1, q.pending, q.prefix, token, lease_ms, PROMOTE_LIMIT, 1
            )
            woke, raw = pipe.execute(raise_on_error=False)
            if isinstance(raw, redis.exceptions.NoScriptError):  # Redis restarted or flushed its scripts
                raw = self.scripts.call("dequeue", q, token, lease_ms, PROMOTE_LIMIT, 1)
            for reply in (woke, raw):
                if isinstance(reply, Exception):
                    denied = denied_in_script("dequeue", str(reply))
                    raise reply if denied is None else redis.exceptions.NoPermissionError(denied)
        return self._claimed(queue, token, raw)

    # -- anyone ----------------------------------------------------------

    def ping(self) -> None:
        """Raise BrokerUnavailable now rather than at the first job."""
        with broker_errors(self.url):
            self.client.ping()

    def cancel(self, queue: str, job_id: str) -> int:
        """1 cancelled, 0 too late (running or finished), -1 no such job."""
        with self.guard(queue):
            return int(self.scripts.call("cancel", QueueKeys(queue), job_id, self.retention_ms))

    def await_state(self, queue: str, job_id: str) -> str | None:
        with self.guard(queue):
            state = self.scripts.call("await", QueueKeys(queue), job_id)
        return state.decode() if state else None

    def wait_done(self, queue: str, job_id: str, timeout: float) -> bool:
        """Block until the job's done list exists; non-destructive so many may wait."""
        key = QueueKeys(queue).done(job_id)
        with self.guard(queue):
            return wait_for_list(self.client, key, timeout)

    def retry_dead(self, queue: str, job_ids: Sequence[str] = (), limit: int = PURGE_SLICE) -> list[str]:
        with self.guard(queue):
            moved = self.scripts.call("retry_dead", QueueKeys(queue), limit, *job_ids)
        return [i.decode() for i in moved]

    def purge(self, queue: str, which: str) -> int:
        """Delete every job of one set ('pending', 'scheduled', 'dead'), in slices."""
        total = 0
        with self.guard(queue):
            while True:
                n = int(self.scripts.call("purge", QueueKeys(queue), which, PURGE_SLICE))
                total += n
                if n == 0:
                    return total

    def register_limits(self, queue: str, limits: dict[str, str]) -> None:
        """A worker publishes its tasks' limits ('' = none), so jobs sent by name obey them too."""
        key = QueueKeys(queue).limits
        with self.guard(queue):
            pipe = self.client.pipeline(transaction=False)
            for task, spec in limits.items():
                if spec:
                    pipe.hset(key, task, spec)
                else:
                    pipe.hdel(key, task)
            pipe.execute()

    def clear(self, queue: str) -> int:
        """Delete every key of ``queue`` (SCAN + UNLINK: never blocks Redis on a big queue)."""
        pattern = QueueKeys(queue).prefix.replace("[", "\\[").replace("?", "\\?").replace("*", "\\*") + "*"
        removed = 0
        with self.guard(queue):
            batch: list[bytes] = []
            where = {"target_nodes": self.client.get_node_from_key(QueueKeys(queue).pending)} if self.cluster else {}
            for key in self.client.scan_iter(match=pattern, count=500, **where):
                batch.append(key)
                if len(batch) >= 500:
                    removed += self.client.unlink(*batch)
                    batch = []
            if batch:
                removed += self.client.unlink(*batch)
        return removed
