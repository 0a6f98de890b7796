"""Wait and run time histograms per queue, task and minute (the dashboard's per-task last hour).

Percentiles of an hour of runs cannot be summed from per-minute
percentiles, and keeping every run's times would cost a write per job. So
each run adds one to a bucket of a fixed histogram, counted by the client
beside its outcome counts (``stats.Tally``) and written with them about once
a second: per queue and minute one hash, ``QueueKeys.stats(minute, "timings")``, whose fields
are ``<task>\\x00w\\x00<bucket>`` (wait) and ``<task>\\x00r\\x00<bucket>``
(run), each a count of runs. Any number of minutes, workers and processes
then merge by adding counts, and the readers work percentiles out of the
merged counts in Python.

The buckets are fixed and log-spaced: bucket 0 holds times up to 0.1 ms,
bucket ``i`` those in ``(BOUNDS[i-1], BOUNDS[i]]``, each bound √2 (about
1.41) times the one before, up to about 79 minutes (``BOUNDS[-1]``); the
last bucket, ``len(BOUNDS)``, holds anything longer. Two buckets per
doubling keep a minute's hash small (a task's runs rarely spread over more
than a dozen buckets) and any reported percentile within a factor of 1.41 of
the true value; with the interpolation of ``percentile`` it is usually much
closer.

The wait is from when the job became ready to when its run started. A
claim carries the job's ``scheduled_at`` (set when it was scheduled, retried,
given back for another worker or put to sleep: Redis's clock) and its id,
whose first 48 bits are when the producer made it (``job_ids.py``); the
later of the two is when it became ready. A job sent with an id of its own
(not a UUIDv7) and never scheduled has no known ready time: its run counts,
its wait does not. A job reclaimed after its worker was lost, or retried
from the dead letters by hand, counts its wait from that same time, so the
time it spent running or dead is in its wait: rare enough to show as an
outlier, not to move a p50. Clocks of different machines meet here, so a
skew of some milliseconds shows in waits that short; a negative wait counts
as zero.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Iterable
from dataclasses import dataclass, field

SMALLEST_S = 0.0001  # the first bound: 0.1 ms
RATIO = math.sqrt(2)
BOUNDS: tuple[float, ...] = tuple(SMALLEST_S * RATIO**k for k in range(52))  # 0.1 ms .. ~79 min
OVERFLOW = len(BOUNDS)  # the bucket of times beyond the last bound
WAIT = "w"
RUN = "r"
NO_WAIT = -1  # a run whose ready time is unknown: counted in the run histogram only

Histogram = dict[int, int]  # bucket -> runs


def bucket_of(seconds: float) -> int:
    """The bucket of a time: the first whose upper bound is at least ``seconds`` (bisect: a few comparisons)."""
    return bisect_left(BOUNDS, seconds)


def upper_bound(bucket: int) -> float:
    """The upper bound of ``bucket`` in seconds; the overflow bucket reports the last bound."""
    return BOUNDS[min(bucket, OVERFLOW - 1)]


def ready_s(job_id: str, scheduled_ms: int | None) -> float | None:
    """When a claimed job became ready (seconds since the epoch), or None when that is not known.

    The later of its ``scheduled_at`` and the time in its id (taskforge's own
    ids are UUIDv7: 32 hex digits, version 7, its first 12 digits the ms).
    """
    created_ms = None
    if len(job_id) == 32 and job_id[12] == "7":
        try:
            created_ms = int(job_id[:12], 16)
        except ValueError:
            created_ms = None
    if scheduled_ms is not None and (created_ms is None or scheduled_ms > created_ms):
        return scheduled_ms / 1000
    return None if created_ms is None else created_ms / 1000


def field_name(task: str, kind: str, bucket: int) -> str:
    return f"{task}\x00{kind}\x00{bucket}"


def parse_field(name: bytes) -> tuple[str, str, int] | None:
    """(task, kind, bucket) of a field; None for anything else (a damaged or foreign field counts as nothing)."""
    parts = name.decode(errors="replace").rsplit("\x00", 2)
    if len(parts) != 3 or parts[1] not in (WAIT, RUN) or not parts[2].isdigit():
        return None
    bucket = int(parts[2])
    return (parts[0], parts[1], bucket) if bucket <= OVERFLOW else None


def merged(histograms: Iterable[Histogram]) -> Histogram:
    """The counts of several histograms (minutes, say) added up."""
    total: Histogram = {}
    for histogram in histograms:
        for bucket, n in histogram.items():
            total[bucket] = total.get(bucket, 0) + n
    return total


def percentile(histogram: Histogram, q: float) -> float | None:
    """The ``q`` quantile (0 < q <= 1) of a histogram in seconds; None when it holds no run.

    Found by rank: the bucket holding the ``q * total``-th run, then
    interpolated within it, geometrically (the buckets are log-spaced), by
    how far into the bucket's runs that rank falls, as if they were spread
    evenly over it on a log scale. Bucket 0 (up to 0.1 ms) is interpolated
    linearly from 0; the overflow bucket reports the last bound, about 79
    minutes, as it has no upper one. So a percentile never leaves the bucket
    its run fell in.
    """
    total = sum(histogram.values())
    if total <= 0:
        return None
    rank = q * total
    seen = 0
    for bucket in sorted(histogram):
        n = histogram[bucket]
        if n <= 0:
            continue
        if seen + n >= rank:
            share = min(1.0, max(0.0, (rank - seen) / n))
            if bucket == 0:
                return SMALLEST_S * share
            if bucket >= OVERFLOW:
                return BOUNDS[-1]
            return float(BOUNDS[bucket - 1] * RATIO**share)
        seen += n
    return upper_bound(max(histogram))


@dataclass
class TaskTimings:
    """One task's wait and run histograms, one of each per minute, oldest first."""

    wait: list[Histogram] = field(default_factory=list)
    run: list[Histogram] = field(default_factory=list)

    @classmethod
    def empty(cls, minutes: int) -> TaskTimings:
        return cls([{} for _ in range(minutes)], [{} for _ in range(minutes)])


def from_hashes(rows: list[object]) -> dict[str, TaskTimings]:
    """Per task, the histograms of one queue's minutes from their HGETALL replies (oldest first).

    A reply that is not a hash (an error: the key holds another type) or a
    field or count that is junk counts as nothing, as the outcome counts do.
    """
    tasks: dict[str, TaskTimings] = {}
    for minute, row in enumerate(rows):
        if not isinstance(row, dict):
            continue
        for raw_field, raw_count in row.items():
            parsed = parse_field(raw_field)
            try:
                n = int(raw_count)
            except (TypeError, ValueError):
                continue
            if parsed is None or n <= 0:
                continue
            task, kind, bucket = parsed
            timings = tasks.get(task)
            if timings is None:
                timings = tasks[task] = TaskTimings.empty(len(rows))
            histogram = (timings.wait if kind == WAIT else timings.run)[minute]
            histogram[bucket] = histogram.get(bucket, 0) + n
    return tasks
