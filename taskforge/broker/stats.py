"""Per-minute outcome counts (the dashboard's last hour), kept by the client and written in batches.

The succeed script used to count each success itself: an ``HINCRBY`` (and a
``PEXPIRE`` each new minute) inside the hottest call, a few microseconds of
Redis time per job. The broker counts successes here instead and writes them
at most about once a second, one pipeline for every queue and minute it
holds, so a busy worker pays those commands once a second, not once a job.
Failures are still counted by the fail script: that path is not hot.

Each run's wait and run time go the same way (``RunTimes``): a bucket of a
fixed histogram per queue, task and minute (``timings.py``), one dict
increment per run, written in the same pipeline as the outcome counts.

Counts are kept per queue and per minute of this machine's clock (the
readers use Redis's clock: a skew of a few seconds moves a few runs to the
neighbouring minute, no more). A flush that fails keeps its counts for the
next one, so an outage delays figures rather than losing them; counts not
flushed when a process dies abruptly are lost, as the figures are a view,
not a record (every job's own record is written by its script).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING

import redis

from .keys import QueueKeys
from .timings import NO_WAIT, RUN, WAIT, bucket_of, field_name, ready_s

if TYPE_CHECKING:
    from .record import Claim

log = logging.getLogger("taskforge.broker")

# How often a busy client writes its counts; an idle one writes before it waits.
FLUSH_EVERY_S = 1.0
# How long a minute's counts are kept (the dashboard shows the last hour).
STATS_TTL_MS = 2 * 3600 * 1000

Counts = dict[tuple[str, int, str], int]  # (queue, minute since the epoch, field) -> runs


class OutcomeCounts:
    """Runs counted since the last flush; safe to share between a child's lanes (threads)."""

    def __init__(self) -> None:
        self._counts: Counts = {}
        self._lock = threading.Lock()
        self.flushed = time.monotonic()

    def count(self, queue: str, field: str = "succeeded") -> None:
        key = (queue, int(time.time() // 60), field)
        with self._lock:
            self._counts[key] = self._counts.get(key, 0) + 1

    def due(self) -> bool:
        """True once there is something to write and the last flush is a second old."""
        return bool(self._counts) and time.monotonic() - self.flushed >= FLUSH_EVERY_S

    def take(self) -> Counts:
        """Everything counted so far, and a fresh start."""
        with self._lock:
            counts, self._counts = self._counts, {}
            self.flushed = time.monotonic()
        return counts

    def give_back(self, counts: Counts) -> None:
        """Counts a flush could not write: kept for the next one."""
        with self._lock:
            for key, n in counts.items():
                self._counts[key] = self._counts.get(key, 0) + n


Runs = dict[tuple[str, str, int, int, int], int]  # (queue, task, minute, wait bucket, run bucket) -> runs


class RunTimes:
    """Runs' wait and run time buckets since the last flush; safe to share between a child's lanes.

    One key per run holds both buckets, so a run costs one dict increment;
    the flush splits it into its wait and its run field.
    """

    def __init__(self) -> None:
        self._runs: Runs = {}
        self._lock = threading.Lock()

    def __bool__(self) -> bool:
        return bool(self._runs)

    def add(self, queue: str, task: str, ready: float | None, run_s: float) -> None:
        """One run of ``run_s`` seconds, ending now, of a job ready since ``ready`` (epoch s; None: unknown)."""
        now = time.time()
        wait = NO_WAIT if ready is None else bucket_of(now - run_s - ready)
        key = (queue, task, int(now // 60), wait, bucket_of(run_s))
        with self._lock:
            self._runs[key] = self._runs.get(key, 0) + 1

    def take(self) -> Runs:
        with self._lock:
            runs, self._runs = self._runs, {}
        return runs

    def give_back(self, runs: Runs) -> None:
        with self._lock:
            for key, n in runs.items():
                self._runs[key] = self._runs.get(key, 0) + n


def timing_fields(runs: Runs) -> dict[tuple[str, int], dict[str, int]]:
    """Per (queue, minute), the HINCRBY of each field: runs split into their wait and run buckets."""
    fields: dict[tuple[str, int], dict[str, int]] = {}
    for (queue, task, minute, wait, run), n in runs.items():
        hincr = fields.setdefault((queue, minute), {})
        if wait != NO_WAIT:
            name = field_name(task, WAIT, wait)
            hincr[name] = hincr.get(name, 0) + n
        name = field_name(task, RUN, run)
        hincr[name] = hincr.get(name, 0) + n
    return fields


class Tally:
    """One client's success counts and run times (``Link.tally``), written in batches; failures: the fail script's."""

    def __init__(self, client: redis.Redis | redis.RedisCluster) -> None:
        self.client = client
        self.outcomes = OutcomeCounts()
        self.times = RunTimes()
        # False where a thread writes the counts (a worker child's): then going
        # idle costs no round trip, which a job arriving just then would wait behind.
        self.flush_on_idle = True

    def count_success(self, queue: str) -> None:
        """Count one success; written with the others at most about once a second.

        A busy client writes here; an idle one writes before it waits, unless
        a worker child's ``keep_counts_written`` thread writes them (it also
        covers a lane that goes straight on to a long job). No timer is
        started here: a thread that outlived its broker would write into
        whatever the database holds by then.
        """
        self.outcomes.count(queue, "succeeded")
        if self.outcomes.due():
            self.flush_outcomes()

    def time_run(self, queue: str, task: str, ready: float | None, run_s: float) -> None:
        """Count one finished run's wait (from ``ready``, epoch seconds; None: unknown) and run time.

        Written with the outcome counts: by the next ``count_success`` that
        finds them due, before the client waits, or by the child's thread.
        """
        self.times.add(queue, task, ready, run_s)

    def time_claim(self, claim: Claim, run_s: float) -> None:
        """``time_run`` for a claim whose run, of ``run_s`` seconds, just ended: what the runner calls."""
        self.times.add(claim.queue, claim.task, ready_s(claim.id, claim.scheduled_at), run_s)

    def due(self) -> bool:
        """True once there is something to write and the last flush is a second old."""
        return self.outcomes.due() or (bool(self.times) and time.monotonic() - self.outcomes.flushed >= FLUSH_EVERY_S)

    def flush_when_idle(self) -> None:
        """About to wait or found nothing: write the counts now unless a thread writes them."""
        if self.flush_on_idle or self.due():
            self.flush_outcomes()

    def flush_outcomes(self) -> None:
        """Write the counted runs: one pipeline, HINCRBY and PEXPIRE per queue and minute.

        Never raises: counts that could not be written are kept for the next
        flush, and a damaged counter key counts as nothing (the readers do the same).
        """
        counts = self.outcomes.take()
        runs = self.times.take()
        if not counts and not runs:
            return
        try:
            pipe = self.client.pipeline(transaction=False)
            for (queue, minute, field), n in counts.items():
                key = QueueKeys(queue).stats(minute)
                pipe.hincrby(key, field, n)
                pipe.pexpire(key, STATS_TTL_MS)
            for (queue, minute), hincr in timing_fields(runs).items():
                key = QueueKeys(queue).stats(minute, "timings")
                for field, n in hincr.items():
                    pipe.hincrby(key, field, n)
                pipe.pexpire(key, STATS_TTL_MS)
            pipe.execute(raise_on_error=False)
        except (redis.RedisError, OSError) as exc:
            self.outcomes.give_back(counts)
            self.times.give_back(runs)
            log.debug("outcome counts not written yet: %s", exc)
