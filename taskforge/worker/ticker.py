"""The periodic scheduler's own thread: it wakes when the next tick is due by Redis's clock.

The supervisor's loop runs its duties every quarter second or so, but a
loaded loop (renewals, reclaims, the heartbeat, a busy machine) can take
longer; a tick taken there could be a second or more late. This thread
sleeps until the next tick by the estimate of Redis's time
(``broker/clock.py``), then lets the scheduler read ``TIME`` and enqueue:
ticks are taken within a round trip of their time, whatever the loop does.

It shares the supervisor's broker (redis-py clients are thread-safe) and its
outage state: while Redis is known to be away it waits, and the first tick
after the outage is the latest one (``Scheduler`` never replays a burst).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING

from .outage import OUTAGE_ERRORS

if TYPE_CHECKING:
    from ..periodic import Scheduler
    from .outage import Outage

log = logging.getLogger("taskforge.worker")

MAX_SLEEP = 1.0  # how long a stop or a clock resync may wait at most


class Ticker:
    def __init__(self, scheduler: Scheduler, outage: Outage, stopping: Callable[[], bool]) -> None:
        self.scheduler = scheduler
        self.outage = outage
        self.stopping = stopping  # a worker that is stopping enqueues no more ticks
        # A flag and time.sleep, not Event.wait(timeout): a lock's timed wait is the one
        # sleep libfaketime (how the tests shift a worker's clock) cannot shift correctly.
        self.stopped = False
        self.thread = threading.Thread(target=self.run, name="taskforge-periodic", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.stopped = True
        self.thread.join(timeout=MAX_SLEEP + 1)

    def run(self) -> None:
        while not self.stopped:
            if not self.outage.down and not self.stopping():
                try:
                    self.scheduler.run_due()
                except OUTAGE_ERRORS:
                    pass  # the supervisor's own duties say so; the next pass catches up
                except Exception:  # a broken schedule must not end the thread
                    log.exception("the periodic scheduler failed; it will try again")
            time.sleep(self.pause())

    def pause(self) -> float:
        """Seconds until the next tick by the estimate of Redis's clock (at most ``MAX_SLEEP``)."""
        try:
            now = self.scheduler.estimate()
        except OUTAGE_ERRORS:
            return MAX_SLEEP
        following = min(s.following(now) for s in self.scheduler.schedules)
        return max(0.005, min(MAX_SLEEP, (following - now) / timedelta(seconds=1)))
