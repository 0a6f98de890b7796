"""Read-only views of a queue: counts, listings, raw records.

For ``taskforge status``, ``taskforge job``, the dead-letter listing and the
dashboard. Each is one or two round trips; none loads every id of a queue.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager

import redis

from . import keys
from .connection import broker_errors
from .damage import queue_errors
from .keys import QueueKeys

PRIORITY_BAND = 2**50  # BAND in lua/_lib.lua: pending score = (3 - priority) * band + sequence


class Inspection:
    """Mixed into ``Broker``; needs its ``client`` and ``url``."""

    client: redis.Redis
    url: str

    def guard(self, *queues: str) -> AbstractContextManager[None]:
        """Redis errors as taskforge errors; damage to these queues' fixed keys as ``CorruptQueue``."""
        return queue_errors(self.client, self.url, queues)

    def read(self, queue: str, job_id: str) -> dict[bytes, bytes] | None:
        """The raw job hash, or None when there is no such job."""
        with broker_errors(self.url):
            try:
                fields = self.client.hgetall(QueueKeys(queue).job(job_id))
            except redis.ResponseError:  # not a hash: written by something else
                return None
        return fields or None

    def limited_groups(self, queue: str) -> list[str]:
        """Tasks of ``queue`` with a rate or concurrency limit (each has its own pending set)."""
        with self.guard(queue):
            return [g.decode() for g in self.client.hkeys(QueueKeys(queue).limits)]

    def counts(self, queue: str) -> dict[str, int]:
        """Sizes of the queue's sets, in two round trips at most."""
        q = QueueKeys(queue)
        groups = self.limited_groups(queue)
        with self.guard(queue):
            pipe = self.client.pipeline(transaction=False)
            for key in (q.pending, q.scheduled, q.running, q.dead, *(q.group_pending(g) for g in groups)):
                pipe.zcard(key)
            pending, scheduled, running, dead, *limited = pipe.execute()
        return {"pending": pending + sum(limited), "scheduled": scheduled, "running": running, "dead": dead}

    def queues(self) -> list[str]:
        """Every queue name ever enqueued to through any app on this Redis."""
        with self.guard():
            return sorted(q.decode() for q in self.client.smembers(keys.QUEUES))

    def pending_by_priority(self, queue: str) -> dict[int, int]:
        """Pending jobs per priority (0 low .. 3 critical), by ZCOUNT over score bands: O(log n).

        Counts the main pending set and those of rate- or concurrency-limited tasks.
        """
        q = QueueKeys(queue)
        keys = [q.pending, *(q.group_pending(g) for g in self.limited_groups(queue))]
        with self.guard(queue):
            pipe = self.client.pipeline(transaction=False)
            for key in keys:
                for priority in range(4):
                    low = (3 - priority) * PRIORITY_BAND
                    pipe.zcount(key, low, f"({low + PRIORITY_BAND}")
            counts = pipe.execute()
        return {priority: sum(int(n) for n in counts[priority::4]) for priority in range(4)}

    def next_due_ms(self, queue: str) -> int | None:
        """When the soonest scheduled or retrying job of ``queue`` is due (ms since the epoch)."""
        with self.guard(queue):
            first = self.client.zrange(QueueKeys(queue).scheduled, 0, 0, withscores=True)
        return int(first[0][1]) if first else None

    def scheduled_states(self, queue: str, sample: int) -> tuple[int, list[str]]:
        """The size of the scheduled set, and the states of up to ``sample`` random members.

        Scheduled and retrying jobs share one zset; only their hashes tell them
        apart. When fewer than ``sample`` are in the set, the states cover all
        of them. ('' for a member without a job record.)
        """
        q = QueueKeys(queue)
        with self.guard(queue):
            pipe = self.client.pipeline(transaction=False)
            pipe.zcard(q.scheduled)
            pipe.zrandmember(q.scheduled, sample)
            try:
                total, ids = pipe.execute()
            except redis.ResponseError:  # Redis < 6.2 has no ZRANDMEMBER: sample the soonest due
                total = self.client.zcard(q.scheduled)
                ids = self.client.zrange(q.scheduled, 0, sample - 1)
            if not ids:
                return int(total), []
            pipe = self.client.pipeline(transaction=False)
            for job_id in ids:
                pipe.hget(q.job(job_id.decode()), "state")
            states = pipe.execute(raise_on_error=False)
        return int(total), [s.decode() if isinstance(s, bytes) else "" for s in states]

    def dead_ids(self, queue: str, limit: int) -> list[tuple[str, int]]:
        """The ``limit`` most recent dead-letter ids with their time of death (ms), newest first."""
        if limit <= 0:
            return []
        with self.guard(queue):
            rows = self.client.zrevrange(QueueKeys(queue).dead, 0, limit - 1, withscores=True)
        return [(job_id.decode(), int(score)) for job_id, score in rows]

    def read_many(self, queue: str, job_ids: Sequence[str]) -> list[dict[bytes, bytes] | None]:
        """The raw hashes of ``job_ids`` in one round trip; None where there is no such job."""
        if not job_ids:
            return []
        q = QueueKeys(queue)
        with self.guard(queue):
            pipe = self.client.pipeline(transaction=False)
            for job_id in job_ids:
                pipe.hgetall(q.job(job_id))
            rows = pipe.execute(raise_on_error=False)
        return [row if isinstance(row, dict) and row else None for row in rows]
