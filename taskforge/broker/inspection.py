"""Read-only views of a queue: counts, listings, raw records (the inspection role).

For ``taskforge status``, the dead-letter listing and the
dashboard. Each is one or two round trips; none loads every id of a queue.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal, cast

import redis

from . import junk
from .connection import broker_errors
from .keys import QueueKeys, deferred_key
from .timings import TaskTimings, from_hashes

if TYPE_CHECKING:
    from .link import Link

PRIORITY_BAND = 2**50  # BAND in lua/lib/keys.lua: pending score = (3 - priority) * band + sequence

# The casts below: redis-py types every reply as ``bytes | str`` because
# ``decode_responses`` is chosen at run time; taskforge's clients never set it,
# so replies are bytes.


class Inspection:
    """Reading a queue for the operators' tools (``Broker.inspection``). Methods take the queue name."""

    def __init__(self, link: Link) -> None:
        self.client = link.client
        self.url = link.url
        self.guard = link.guard
        self.tally = link.tally  # flush_outcomes: the runs this client counted but has not written yet

    def limited_groups(self, queue: str) -> list[str]:
        """Tasks of ``queue`` with a rate or concurrency limit (each has its own pending set)."""
        with self.guard(queue):
            key = QueueKeys(queue).limits
            return junk.texts(junk.read(lambda: cast("list[bytes]", self.client.hkeys(key)), key, []), key)

    def counts(self, queue: str) -> dict[str, int]:
        """Sizes of the queue's sets, in two round trips at most."""
        q = QueueKeys(queue)
        groups = self.limited_groups(queue)
        fixed = [q.lane_jobs, q.pending, q.scheduled, q.running, q.dead, deferred_key(q)]
        keys = [*fixed, *(q.group_pending(g) for g in groups)]
        with self.guard(queue):
            pipe = self.client.pipeline(transaction=False)
            pipe.hgetall(q.lane_jobs)
            for key in keys[1:]:
                pipe.zcard(key)
            laned, pending, scheduled, running, dead, deferred, *limited = junk.replies(
                pipe.execute(raise_on_error=False), keys, [{}, *[0] * (len(keys) - 1)]
            )
        pending += sum(limited) + sum(junk.count(n, q.lane_jobs) for n in laned.values())
        return {"pending": pending, "scheduled": scheduled, "running": running, "dead": dead, "deferred": deferred}

    def pending_by_priority(self, queue: str) -> dict[int, int]:
        """Pending jobs per priority (0 low .. 3 critical), by ZCOUNT over score bands: O(log n).

        Counts the main pending set, those of rate- or concurrency-limited
        tasks, and the keyed jobs' lanes (from the count the scripts keep per band).
        """
        q = QueueKeys(queue)
        keys = [q.pending, *(q.group_pending(g) for g in self.limited_groups(queue))]
        with self.guard(queue):
            pipe = self.client.pipeline(transaction=False)
            pipe.hgetall(q.lane_jobs)
            for key in keys:
                for priority in range(4):
                    low = (3 - priority) * PRIORITY_BAND
                    pipe.zcount(key, low, f"({low + PRIORITY_BAND}")
            asked = [q.lane_jobs, *(key for key in keys for _ in range(4))]
            laned, *counts = junk.replies(pipe.execute(raise_on_error=False), asked, [{}, *[0] * (len(asked) - 1)])
        by_priority = {priority: sum(int(n) for n in counts[priority::4]) for priority in range(4)}
        for band, n in cast("dict[bytes, bytes]", laned).items():
            priority = 3 - junk.number(band, q.lane_jobs, -1)
            if priority in by_priority:
                by_priority[priority] += junk.count(n, q.lane_jobs)
        return by_priority

    def next_due_ms(self, queue: str) -> int | None:
        """When the soonest scheduled or retrying job of ``queue`` is due (ms since the epoch)."""
        key = QueueKeys(queue).scheduled
        with self.guard(queue):
            first = junk.read(lambda: self.client.zrange(key, 0, 0, withscores=True), key, [])
        return junk.number(first[0][1], key) if first else None

    def due_count(self, queue: str) -> int:
        """Scheduled and retrying jobs of ``queue`` already due, by Redis's clock: work a worker would
        promote and run now (what an autoscaler with no worker running must count)."""
        with self.guard(queue):
            seconds, micros = self.client.time()
            now_ms = seconds * 1000 + micros // 1000
            key = QueueKeys(queue).scheduled
            return int(junk.read(lambda: self.client.zcount(key, "-inf", now_ms), key, 0))

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
                total, ids = junk.read(pipe.execute, q.scheduled, (0, []))
            except redis.ResponseError:  # Redis < 6.2 has no ZRANDMEMBER: sample the soonest due
                total = self.client.zcard(q.scheduled)
                ids = self.client.zrange(q.scheduled, 0, sample - 1)
            ids = junk.texts(ids, q.scheduled)
            if not ids:
                return int(total), []
            pipe = self.client.pipeline(transaction=False)
            for job_id in ids:
                pipe.hget(q.job(job_id), "state")
            states = pipe.execute(raise_on_error=False)
        return int(total), [s.decode(errors="replace") if isinstance(s, bytes) else "" for s in states]

    def dead_ids(self, queue: str, limit: int) -> list[tuple[str, int]]:
        """The ``limit`` most recent dead-letter ids with their time of death (ms), newest first."""
        if limit <= 0:
            return []
        key = QueueKeys(queue).dead
        with self.guard(queue):
            rows = cast(
                "list[tuple[bytes, float]]",
                junk.read(lambda: self.client.zrevrange(key, 0, limit - 1, withscores=True), key, []),
            )
        return members(rows, key)

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

    def page(self, queue: str, state: str, offset: int, count: int) -> tuple[int, list[tuple[str, int]]]:
        """One page of a queue's set, with its size: O(log n + count), never the whole set.

        ``state`` is ``pending`` (best first: priority, then age), ``scheduled``
        (scheduled and retrying, soonest due first), ``running`` (soonest lease
        end first) or ``dead`` (newest first). Pending jobs of rate- or
        concurrency-limited tasks wait in sets of their own and are not listed.
        """
        key = {
            "pending": QueueKeys(queue).pending,
            "scheduled": QueueKeys(queue).scheduled,
            "running": QueueKeys(queue).running,
            "dead": QueueKeys(queue).dead,
        }[state]
        with self.guard(queue):
            pipe = self.client.pipeline(transaction=False)
            pipe.zcard(key)
            if state == "dead":
                pipe.zrevrange(key, offset, offset + count - 1, withscores=True)
            else:
                pipe.zrange(key, offset, offset + count - 1, withscores=True)
            total, rows = junk.read(pipe.execute, key, (0, []))
        return int(total), members(rows, key)

    def expired_last_hour(self, queue: str) -> int:
        """Jobs of ``queue`` that expired unrun in the last 60 minutes (Redis's clock), from its per-minute stats."""
        with broker_errors(self.url):
            seconds, _ = self.client.time()
            last = int(seconds) // 60
            q = QueueKeys(queue)
            pipe = self.client.pipeline(transaction=False)
            for minute in range(last - 59, last + 1):
                pipe.hget(q.stats(minute), "expired")
            rows = pipe.execute(raise_on_error=False)
        total = 0
        for value in rows:
            try:
                total += max(0, int(value or 0))
            except (TypeError, ValueError):  # a damaged key counts as nothing
                pass
        return total

    def _minutes(
        self, queues: Sequence[str], minutes: int, read: Callable[[Any, str], object], of: Literal["stats", "timings"]
    ) -> tuple[int, list[Any]]:
        """The first of the last ``minutes`` minutes on Redis's clock, and ``read`` of each queue's per-minute
        key of kind ``of``, queue by queue, oldest minute first: TIME, then one pipeline. What this client
        counted is written first."""
        self.tally.flush_outcomes()
        with broker_errors(self.url):
            seconds, _ = self.client.time()
            last = int(seconds) // 60
            first = last - minutes + 1
            pipe = self.client.pipeline(transaction=False)
            for queue in queues:
                q = QueueKeys(queue)
                for minute in range(first, last + 1):
                    read(pipe, q.stats(minute, of))
            return first, pipe.execute(raise_on_error=False) if queues else []

    def outcome_history(self, queues: Sequence[str], minutes: int = 60) -> tuple[int, dict[str, list[tuple[int, int]]]]:
        """Runs succeeded and failed per minute over the last ``minutes``, oldest first, per queue.

        Returns the first minute shown (ms since the epoch) and, per queue,
        one (succeeded, failed) pair a minute, the current minute last.
        Minutes are read on Redis's clock, the one the scripts count with.
        Two round trips whatever the queue sizes: TIME, then one HMGET per
        queue and minute. Runs this client counted are written first.
        """
        first, rows = self._minutes(queues, minutes, lambda pipe, key: pipe.hmget(key, "succeeded", "failed"), "stats")
        history = {
            queue: [_pair(row) for row in rows[i * minutes : (i + 1) * minutes]] for i, queue in enumerate(queues)
        }
        return first * 60000, history

    def task_timings(self, queues: Sequence[str], minutes: int = 60) -> tuple[int, dict[str, dict[str, TaskTimings]]]:
        """Per queue and task, wait and run time histograms per minute over the last ``minutes``, oldest first.

        Returns the first minute shown (ms since the epoch) and, per queue,
        the tasks that ran in those minutes, each with one wait and one run
        histogram a minute (``timings.py``: bucket -> runs; every worker's
        runs merged, as Redis adds them up). Percentiles are left to the
        caller (``timings.percentile``): over one minute or, merged, the hour.
        Same clock and cost as ``outcome_history``: TIME, then one HGETALL
        per queue and minute; runs this client timed are written first.
        """
        first, rows = self._minutes(queues, minutes, lambda pipe, key: pipe.hgetall(key), "timings")
        return first * 60000, {
            queue: from_hashes(rows[i * minutes : (i + 1) * minutes]) for i, queue in enumerate(queues)
        }


def members(rows: Sequence[tuple[bytes, float]], key: str) -> list[tuple[str, int]]:
    """(member, score) pairs of a zset as text and ms; a member that is not UTF-8 left out, a junk score read as 0."""
    return [(member, junk.number(score, key)) for raw, score in rows if (member := junk.text(raw, key)) is not None]


def _pair(row: object) -> tuple[int, int]:
    """(succeeded, failed) from one HMGET reply; a damaged key counts as nothing."""
    if not isinstance(row, list):
        return 0, 0
    counts = []
    for value in row:
        try:
            counts.append(max(0, int(value or 0)))
        except ValueError:
            counts.append(0)
    return counts[0], counts[1]
