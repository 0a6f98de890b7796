"""Per-minute outcome counts (the dashboard's last hour), kept by the client and written in batches.

The succeed script used to count each success itself: an ``HINCRBY`` (and a
``PEXPIRE`` each new minute) inside the hottest call, a few microseconds of
Redis time per job. The broker counts successes here instead and writes them
at most about once a second, one pipeline for every queue and minute it
holds, so a busy worker pays those commands once a second, not once a job.
Failures are still counted by the fail script: that path is not hot.

Counts are kept per queue and per minute of this machine's clock (the
readers use Redis's clock: a skew of a few seconds moves a few runs to the
neighbouring minute, no more). A flush that fails keeps its counts for the
next one, so an outage delays figures rather than losing them; counts not
flushed when a process dies abruptly are lost, as the figures are a view,
not a record (every job's own record is written by its script).
"""

from __future__ import annotations

import threading
import time

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
        self._flushed = time.monotonic()

    def count(self, queue: str, field: str = "succeeded") -> None:
        key = (queue, int(time.time() // 60), field)
        with self._lock:
            self._counts[key] = self._counts.get(key, 0) + 1

    def due(self) -> bool:
        """True once there is something to write and the last flush is a second old."""
        return bool(self._counts) and time.monotonic() - self._flushed >= FLUSH_EVERY_S

    def take(self) -> Counts:
        """Everything counted so far, and a fresh start."""
        with self._lock:
            counts, self._counts = self._counts, {}
            self._flushed = time.monotonic()
        return counts

    def give_back(self, counts: Counts) -> None:
        """Counts a flush could not write: kept for the next one."""
        with self._lock:
            for key, n in counts.items():
                self._counts[key] = self._counts.get(key, 0) + n
