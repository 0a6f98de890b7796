"""Redis's clock, for the decisions workers share: which periodic tick is due, who is alive.

Every worker reads the time that decides something shared from the one
clock they all see, Redis's ``TIME``, never from its own: a worker whose
wall clock is minutes off (a container without NTP, a VM resumed from a
snapshot) would otherwise enqueue periodic ticks minutes early or late and
prune live workers from the listing. The queue's scripts already read
``TIME`` themselves (leases, schedules, retries); this is the same clock
for the supervisor's Python side.

One ``TIME`` read is tied to this process's monotonic clock, so reading
the time between two reads costs no round trip; a read is refreshed every
``RESYNC_EVERY`` seconds, and callers that are about to act on the time
(enqueue a tick, prune the listing) read it afresh with ``sync()``.
"""

from __future__ import annotations

import time
from datetime import datetime, timezone
from typing import Any

RESYNC_EVERY = 10.0
# A worker whose wall clock is further than this from Redis's says so: the
# round trip of one TIME read is well under it, NTP keeps clocks far closer.
SKEW_WARN_MS = 2_000


class RedisClock:
    """Redis's time in ms, from ``TIME`` reads on ``client`` tied to the monotonic clock."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.base_ms = 0.0  # Redis ms minus monotonic ms at the last read
        self.offset_ms = 0  # this process's wall clock minus Redis's, at the last read
        self.synced_at = float("-inf")  # monotonic time of the last read

    def sync(self) -> int:
        """Read Redis's ``TIME`` now (one round trip); returns Redis's time in ms."""
        before = time.monotonic()
        wall = time.time()
        seconds, micros = self.client.time()
        after = time.monotonic()
        redis_ms = int(seconds) * 1000 + int(micros) / 1000
        # The reply left Redis about halfway through the round trip.
        middle = (before + after) / 2
        self.base_ms = redis_ms - middle * 1000
        self.offset_ms = round((wall + (after - before) / 2) * 1000 - redis_ms)
        self.synced_at = after
        return int(redis_ms)

    def now_ms(self) -> int:
        """Redis's time in ms, from the last read (a fresh read when it is older than ``RESYNC_EVERY``)."""
        now = time.monotonic()
        if now - self.synced_at > RESYNC_EVERY:
            return self.sync()
        return int(now * 1000 + self.base_ms)

    def now(self) -> datetime:
        return datetime.fromtimestamp(self.now_ms() / 1000, tz=timezone.utc)

    def skew_text(self) -> str | None:
        """A sentence about this process's wall clock when it is off by more than ``SKEW_WARN_MS``, else None."""
        if abs(self.offset_ms) <= SKEW_WARN_MS:
            return None
        way = "ahead of" if self.offset_ms > 0 else "behind"
        return (
            f"this worker's clock is {abs(self.offset_ms) / 1000:.1f} s {way} Redis's; "
            "periodic ticks, leases and the worker listing follow Redis's clock, "
            "but timestamps this process logs do not (fix the host's time sync, e.g. NTP)"
        )
