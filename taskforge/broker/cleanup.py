"""Emptying what a queue holds: ``taskforge purge`` and ``dead retry`` (scripts, in slices), and
deleting a whole queue (``purge``'s last step, and the tests' clean slate).

Kept out of ``queue.py``: operators' actions, not a job's transitions;
the whole-queue walk never blocks Redis.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, cast

import redis

from ..errors import ConfigurationError, QueueNotEmpty
from . import calls, keys
from .keys import QueueKeys, validate_queue_name
from .replies import CancelOutcome

if TYPE_CHECKING:
    from .link import Link

# Jobs a purge, a dead retry or a bulk action moves per script call: a dead
# job retried costs its script about a dozen commands, so 100 keep each call
# to a few milliseconds of Redis time, and Redis never blocks long.
PURGE_SLICE = 100
# Dead jobs a retry moves per script call: each costs its script about a dozen
# commands (benchmarks/search.py: a call of 100 took 1 to 8 ms on a busy
# machine), so retries go by 50, well inside a few milliseconds.
RETRY_SLICE = 50
# Index members one sweep call looks at: each costs a PTTL and its share of
# two ZREMs (five index entries), 10 to 40 µs of Redis time on a small
# machine, so a slice takes a few milliseconds (benchmarks/soak.py).
SWEEP_SLICE = 200


class RetentionCounts:
    """``retention_count`` per queue: the queue's own, else the app's (0: no count).

    One object per broker, filled in by the app, read by every finishing
    call: the scripts keep at most that many finished records per queue.
    """

    def __init__(self, default: int = 0, queues: Mapping[str, int] | None = None) -> None:
        self.default = default
        self.queues: dict[str, int] = dict(queues or {})

    def __call__(self, queue: str) -> int:
        return self.queues.get(queue, self.default)

    @classmethod
    def of(cls, value: object) -> RetentionCounts:
        """From the app's ``retention_count``: a count for every queue, or a mapping queue -> count."""
        if isinstance(value, Mapping):
            counts = {validate_queue_name(q): _count(f"retention_count[{q!r}]", n) for q, n in value.items()}
            return cls(0, counts)
        return cls(_count("retention_count", value))

    def update(self, other: RetentionCounts) -> None:
        self.default, self.queues = other.default, dict(other.queues)


def _count(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigurationError(
            f"{name}={value!r}: use a whole number >= 0 (0: no count), or a mapping of queue names to one"
        )
    return value


class Cleanup:
    """The operators' actions on a queue (``Broker.cleanup``). Methods take the queue name."""

    def __init__(self, link: Link) -> None:
        self.client = link.client
        self.scripts = link.scripts
        self.guard = link.guard
        self.retention_ms = link.retention_ms
        self.retention_count = link.retention_count

    def retry_dead(self, queue: str, job_ids: Sequence[str] = (), limit: int = PURGE_SLICE) -> list[str]:
        with self.guard(queue):
            return self.scripts.run(calls.retry_dead(QueueKeys(queue), limit=limit, job_ids=job_ids))

    def oldest_dead(self, queue: str, limit: int) -> list[str]:
        """The oldest ``limit`` dead jobs of ``queue`` (the ones ``retry_dead`` takes when given no ids)."""
        with self.guard(queue):
            raw = cast("list[bytes]", self.client.zrange(QueueKeys(queue).dead, 0, limit - 1))
        return [i.decode() for i in raw]

    def delete(self, queue: str, job_ids: Sequence[str]) -> int:
        """Finished jobs (succeeded, dead, cancelled) deleted for good, in one script call: how many went."""
        with self.guard(queue):
            return self.scripts.run(calls.delete_jobs(QueueKeys(queue), job_ids=job_ids))

    def cancel_each(self, queue: str, job_ids: Sequence[str]) -> list[CancelOutcome]:
        """``JobHandle.cancel()``'s script for each job, in one pipeline: each job is its own atomic call."""
        q = QueueKeys(queue)
        with self.guard(queue):
            return self.scripts.run_each([calls.cancel(q, job_id=i, retention_ms=self.retention_ms) for i in job_ids])

    def purge(self, queue: str, which: str) -> int:
        """Delete every job of one set ('pending', 'scheduled', 'dead'), in slices; then, when no job
        is left waiting, running or dead, the queue's bookkeeping keys (``tidy``)."""
        total = 0
        call = calls.purge(QueueKeys(queue), which=which, limit=PURGE_SLICE)
        with self.guard(queue):
            while True:
                n = self.scripts.run(call)
                total += n
                if n == 0:
                    break
        self.tidy(queue)
        return total

    def tidy(self, queue: str) -> int:
        """The keys a queue keeps for its jobs (sequence, wake list, lane counts, sweep cursors), deleted
        when it holds no job waiting, running or dead: a purged queue leaves none. How many went."""
        call = calls.forget(QueueKeys(queue), phase="tidy", cursor="0", pattern="")
        with self.guard(queue):
            return self.scripts.run(call)[2]

    def forget(self, queue: str) -> int:
        """Delete every key of ``queue``, then its name from the registry: how many keys went.

        Raises ``QueueNotEmpty`` (nothing more deleted) when a job waits, runs
        or is dead there. In slices of one SCAN step (``forget.lua``), each
        checking the queue again, so a job sent meanwhile stops it, and Redis
        never blocks long; the registry entry (another slot) goes last.
        """
        q = QueueKeys(queue)
        pattern = glob_literal(q.prefix) + "*"
        cursor, deleted = "0", 0
        with self.guard(queue):
            while True:
                holding, cursor, n = self.scripts.run(calls.forget(q, phase="forget", cursor=cursor, pattern=pattern))
                if holding:
                    raise QueueNotEmpty(queue, holding)
                deleted += n
                if cursor == "0":
                    break
            self.client.srem(keys.QUEUES, queue)
        return deleted

    def sweep(self, queue: str, budget: float) -> tuple[int, bool]:
        """The index entries of expired records, a slice per call, while slices come back full (and
        finished records past the queue's ``retention_count``).

        Stops after ``budget`` seconds, so a worker far behind (a burst of
        finished jobs) catches up over a few ticks without holding up its
        other duties, and each call keeps Redis busy a few milliseconds.
        Returns how many index members were looked at, and whether more are due.
        """
        call = calls.sweep(QueueKeys(queue), limit=SWEEP_SLICE, retention_count=self.retention_count(queue))
        deadline = time.monotonic() + budget
        total = 0
        with self.guard(queue):
            while True:
                taken, more = self.scripts.run(call)
                total += taken
                if not more or time.monotonic() >= deadline:
                    return total, more

    def clear(self, queue: str) -> int:
        """Delete every key of ``queue`` (SCAN + UNLINK: never blocks Redis on a big queue)."""
        pattern = glob_literal(QueueKeys(queue).prefix) + "*"
        removed = 0
        with self.guard(queue):
            batch: list[bytes] = []
            client = self.client
            where = (
                {"target_nodes": client.get_node_from_key(QueueKeys(queue).pending)}
                if isinstance(client, redis.RedisCluster)
                else {}
            )
            for key in self.client.scan_iter(match=pattern, count=500, **where):
                batch.append(key)
                if len(batch) >= 500:
                    removed += self.client.unlink(*batch)
                    batch = []
            if batch:
                removed += self.client.unlink(*batch)
        return removed


def glob_literal(text: str) -> str:
    """``text`` as a SCAN MATCH pattern that matches only itself: the backslash, Redis's escape, first."""
    for special in ("\\", "[", "]", "?", "*"):
        text = text.replace(special, "\\" + special)
    return text
