"""The event loop's own claimer: a lane whose capacity is the loop's free slots.

It shares everything with the thread lanes (the child's one waiter on
Redis, round-robin across queues, quarantine, outage backoff, burst mode)
but runs nothing itself: it claims only while a slot of the loop is free,
and hands what it claimed to the loop. A job of a sync task goes back to
its queue for a lane (see ``aio_loop.py`` for why it is not held).

In burst mode a lane that finds its queue empty stays on while the feeder
has just handed a job back (the job is in flight, not gone), and a feeder
whose child has no lane left stops: with nobody to hand a sync job to, it
would claim and give back the same job for ever.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..broker.queue import Claim
from .lane import Claimed, Lane

if TYPE_CHECKING:
    from .aio_loop import AsyncSide
    from .child import Child

FEEDER = -1  # never a slot id: the feeder reports no job of its own


class AsyncFeeder(Lane):
    def __init__(self, child: Child, side: AsyncSide) -> None:
        super().__init__(child, FEEDER)
        self.side = side
        self.orphaned = False  # burst mode: every lane of the child ended, so no sync job can be handed on
        self.batching = False  # one job per claim: it claims only while a slot of the loop is free
        self.size.size = 1

    @property
    def stopping(self) -> bool:
        return self.orphaned or super().stopping

    def claim(self) -> Claimed:
        if not self.side.wait(self.side.has_room, self):
            return [], 0.0  # stopping: the lane loop ends
        self.side.feeder_claiming = True
        try:
            claimed = super().claim()
        except BaseException:
            self.side.feeder_claiming = False
            raise
        if not claimed[0]:
            self.side.feeder_claiming = False
        return claimed

    def dispatch(self, claim: Claim) -> Claimed | None:
        try:
            if self.side.is_async(claim):
                self.side.take(self, claim)
                return None
            self.give_back([claim])
            self.side.handed_back += 1
        finally:
            self.side.feeder_claiming = False
        self.hand_on_after_start()
        if not self.child.lanes_left():
            self.orphaned = True
            return None
        self.child.hand_on()  # a lane resting behind the waiter takes it
        self.side.wait_for_lane(self)
        return None
