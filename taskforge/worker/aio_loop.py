"""A child's event loop: up to ``--async N`` jobs of ``async def`` tasks at once, in a thread of its own.

How a claimed job finds its place. A claim takes the head of a queue and
cannot choose the kind of task it gets, so every claimer routes what it
got, and gives back (``requeue``: its place in line and its attempt kept)
what it cannot start at once:

* the lanes (threads) claim when free, as ever; a job of an async task is
  handed to the loop if a slot is free, else given back, and the lane
  waits for a slot to free before claiming again;
* the loop's own claimer (``aio_feed.AsyncFeeder``, a lane whose capacity
  is the loop's free slots) claims only while a slot is free; a job of a
  sync task is given back for a lane to take, and it waits for a lane to
  start a job before claiming again.

So no async job is held past a free slot (the loop's claimer takes one job
per claim whatever ``--prefetch`` says, and a lane's batch gives back the
async jobs it has no slot for), a job waits only for a
slot of its own kind, a sync task never runs on the loop and an async task
never in a lane; the price is a give-back when the head of the queue is of
a kind this child has no room for, which lets another worker take it.

Each async job is reported to the supervisor as a lane job is, under a
slot id after the lanes' (``messages.py``), so its lease is renewed by the
supervisor even while a task blocks the loop. The supervisor's
``CancelJob`` arrives on a second pipe, read by a thread here, and cancels
the job's task. A watchdog thread says when the loop was blocked for more
than a second, and by which job.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import logging
import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, TypeVar

from ..broker.queue import Claim
from .aio_run import ABORT, SOFT, TIMEOUT, Flight, arun_claim, guarded
from .joblog import log_outcome
from .lane import LANE_WAIT
from .messages import CancelJob, JobFinished, JobStarted, LaneIdle, LoopBlocked
from .runner import adopted

if TYPE_CHECKING:
    from collections.abc import Callable

    from .child import Child
    from .lane import Lane

log = logging.getLogger("taskforge.worker")
T = TypeVar("T")

LAG_TICK = 0.25  # how often the loop proves it runs
LAG_LIMIT = 1.0  # a loop that did not run for longer than this is said to be blocked
RECORDERS = 8  # threads recording async outcomes (Redis calls): enough for 100 jobs ending at once
LANE_PATIENCE = 1.0  # after giving a sync job back, the loop's claimer waits this long at most for a lane


def is_async_task(task: Any) -> bool:
    return inspect.iscoroutinefunction(getattr(task, "func", None))


class AsyncSide:
    """The event loop of one child, its slots, and the threads that watch it."""

    def __init__(self, child: Child, slots: int, first_slot: int) -> None:
        self.child = child
        self.context = child.context
        self.kinds = {name: is_async_task(task) for name, task in self.context.tasks.items()}
        self.slots = slots
        self.free = list(range(first_slot + slots - 1, first_slot - 1, -1))  # pop() gives the lowest id
        self.changed = threading.Condition(threading.Lock())  # a slot freed, or a lane started a job
        self.lane_starts = 0
        # Burst mode: while the loop's claimer claims, it may hold a sync job a lane would
        # have found; ``handed_back`` counts the jobs it gave back to their queue.
        self.feeder_claiming = False
        self.handed_back = 0
        self.flights: dict[str, Flight] = {}  # job id -> its run, read by the loop's thread only
        self.loop = asyncio.new_event_loop()
        self.recorders = ThreadPoolExecutor(max_workers=min(RECORDERS, slots), thread_name_prefix="taskforge-record")
        self.thread = threading.Thread(target=self.run_loop, name="taskforge-loop", daemon=True)
        self.beat = time.monotonic()
        self.closed = threading.Event()

    def is_async(self, claim: Claim) -> bool:
        return self.kinds.get(claim.task, False)

    def start(self) -> None:
        self.thread.start()
        threading.Thread(target=self.watch, name="taskforge-loop-watch", daemon=True).start()

    def run_loop(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.call_soon(self.tick)
        try:
            self.loop.run_forever()
        except BaseException:  # a task raised SystemExit or KeyboardInterrupt: die as a lane would
            log.exception("child %d: the event loop stopped", self.child.config.index)
            os._exit(1)

    # -- claimers: lanes and the loop's own --------------------------------

    def has_room(self) -> bool:
        return bool(self.free)

    def place(self, claim: Claim) -> bool:
        """Start ``claim`` on a free slot; False when none is free (the caller gives it back).

        The supervisor hears of the job from the claiming thread, before the
        loop sees it: a loop blocked by another job must not leave this
        claim's lease unrenewed (it would expire, and the job run twice).
        """
        with self.changed:
            if not self.free or self.closed.is_set():
                return False
            slot = self.free.pop()
        try:
            claim = adopted(self.context, claim, self.child.outage)
            fields = (claim.id, claim.token, claim.queue, claim.task, claim.attempts, claim.timeout, claim.max_attempts)
            self.child.send(JobStarted(slot, *fields, self.child.soft_timeout(claim.task)))
        except BaseException:
            self.release(slot)
            raise
        # A fresh, empty context: nothing of the claiming thread leaks into the job.
        self.loop.call_soon_threadsafe(self.launch, slot, claim, context=contextvars.Context())
        return True

    def release(self, slot: int) -> None:
        # Said before the slot is reused: the supervisor must not read this after the next JobStarted.
        self.child.send(LaneIdle(slot))
        with self.changed:
            self.free.append(slot)
            self.changed.notify_all()

    def take(self, lane: Lane, claim: Claim) -> None:
        """A lane claimed a job of an async task: onto the loop, or back to its queue until a slot frees."""
        placed = self.place(claim)
        if placed:
            self.child.count_job()
        else:
            lane.give_back([claim])
        lane.hand_on_after_start()
        if lane.index >= 0:
            self.child.send(LaneIdle(lane.index))  # a lane that chained this claim ends its previous job here
        if not placed:
            self.wait(self.has_room, lane)

    def lane_started(self) -> None:
        with self.changed:
            self.lane_starts += 1
            self.changed.notify_all()

    def wait(self, ready: Callable[[], bool], lane: Lane, patience: float | None = None) -> bool:
        """Block ``lane`` until ``ready()`` (checked as slots free and lanes start), it stops, or ``patience`` ends."""
        deadline = None if patience is None else time.monotonic() + patience
        with self.changed:
            while not ready():
                if lane.stopping or (deadline is not None and time.monotonic() >= deadline):
                    return False
                self.changed.wait(LANE_WAIT)
        return True

    def may_hold(self, seen: int) -> bool:
        """Whether the loop's claimer holds, or gave back since ``handed_back`` was ``seen``, a job a
        lane found missing: in burst mode such a lane must look again rather than end."""
        return self.feeder_claiming or self.handed_back != seen

    def wait_for_lane(self, lane: Lane) -> None:
        seen = self.lane_starts
        self.wait(lambda: self.lane_starts != seen, lane, LANE_PATIENCE)

    # -- on the loop ---------------------------------------------------------

    def tick(self) -> None:
        self.beat = time.monotonic()
        self.loop.call_later(LAG_TICK, self.tick)

    def launch(self, slot: int, claim: Claim) -> None:
        # Known at once, so a CancelJob queued behind this call finds it even before it first runs.
        flight = self.flights[claim.id] = Flight(claim, slot)
        self.loop.create_task(self.run_job(flight))

    async def offload(self, call: Callable[[], T]) -> T:
        return await self.loop.run_in_executor(self.recorders, call)

    async def run_job(self, flight: Flight) -> None:
        child, claim, slot = self.child, flight.claim, flight.slot
        try:
            outcome = await arun_claim(self.context, claim, self.offload, child.outage, flight)
            if child.config.report_outcomes:
                child.send(JobFinished(slot, outcome.state, outcome.duration))
            if outcome.state == "cancelled":
                log.info("task %s job %s aborted after %.3f s: cancelled", claim.task, claim.id, outcome.duration)
            else:
                log_outcome(claim, outcome)
        except Exception:  # never lose the slot: the lease expires and the job is reclaimed
            log.exception("child %d: async job %s was not recorded", child.config.index, claim.id)
        finally:
            self.flights.pop(claim.id, None)
            self.release(slot)

    def cancel_now(self, job_id: str, reason: str) -> None:
        flight = self.flights.get(job_id)
        if flight is None or flight.reason is not None or (flight.user is not None and flight.user.done()):
            return  # ended meanwhile: its outcome stands
        flight.reason = reason
        why = "it ran past its timeout" if reason == TIMEOUT else "it was aborted"
        log.info("task %s job %s: cancelled (%s)", flight.claim.task, job_id, why)
        if flight.user is not None:
            flight.user.cancel()

    # -- threads around the loop -----------------------------------------

    def on_control(self, message: CancelJob) -> bool:
        """A request of the supervisor's about one of this loop's jobs; False if the job is none of them.

        Called from the child's control listener: it reaches the loop even while
        the loop is blocked (and runs once it is free).
        """
        if message.job_id not in self.flights:
            return False
        if message.reason in (TIMEOUT, ABORT):
            self.loop.call_soon_threadsafe(self.cancel_now, message.job_id, message.reason)
        elif message.reason == SOFT:
            self.loop.call_soon_threadsafe(self.soft_cancel, message.job_id)
        return True

    def soft_cancel(self, job_id: str) -> None:
        """Past its soft timeout: cancel the task, whose own code decides the outcome (it may catch it)."""
        flight = self.flights.get(job_id)
        if flight is None or flight.reason is not None or flight.user is None or flight.user.done():
            return
        flight.soft = True
        log.info("task %s job %s: cancelled (it ran past its soft timeout)", flight.claim.task, job_id)
        flight.user.cancel()

    def watch(self) -> None:
        """Say when the loop has not run for over LAG_LIMIT seconds, naming the job blocking it, once per stall."""
        warned = 0.0
        while not self.closed.wait(LAG_TICK):
            beat = self.beat
            lag = time.monotonic() - beat - LAG_TICK
            if lag <= LAG_LIMIT or beat == warned:
                continue
            warned = beat
            claim = self.blocking()
            index = self.child.config.index
            if claim is None:
                log.warning("child %d: event loop blocked for over %.1f s, outside any job", index, lag)
            else:
                log.warning(
                    "child %d: event loop blocked for over %.1f s by task %s job %s; this child's other async jobs "
                    "wait meanwhile (await instead, or move blocking code to asyncio.to_thread)",
                    index,
                    lag,
                    claim.task,
                    claim.id,
                )
            if self.child.config.report_outcomes:
                named = (claim.id, claim.task, claim.queue) if claim is not None else ("", "", "")
                self.child.send(LoopBlocked(*named, lag))

    def blocking(self) -> Claim | None:
        """The job whose code the loop's thread is running now: the innermost ``guarded`` frame's claim."""
        frame = sys._current_frames().get(self.thread.ident or -1)
        while frame is not None:
            if frame.f_code is guarded.__code__:
                claim = frame.f_locals.get("claim")
                return claim if isinstance(claim, Claim) else None
            frame = frame.f_back
        return None

    # -- the end ---------------------------------------------------------------

    def busy(self) -> bool:
        with self.changed:
            return len(self.free) < self.slots

    def finish(self) -> None:
        """The claimers stopped: let the running jobs end (the supervisor kills us past the grace), then close."""
        self.closed.set()
        while self.busy():
            time.sleep(0.1)  # short sleeps: the main thread stays free for SIGTERM
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=5)
        self.recorders.shutdown(wait=True)
