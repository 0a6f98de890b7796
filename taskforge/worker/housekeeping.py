"""The supervisor's periodic Redis work: when each duty runs, and why none can stop the loop.

Four duties share one clock: renew this worker's leases, reclaim expired
claims (with it, the supervisor also rescues the claims of this host's dead
workers, sweeps expired records' index entries and runs the workflows'
reconciler), publish the heartbeat that ``taskforge status`` reads, and
enqueue due periodic tasks. Their order after an outage matters (renew before
reclaim, or this worker's own live jobs look expired), and a failing duty
must leave the supervisor running its children: both rules live here, as
does the supervisor's account of an outage (said once, then with backoff,
then ``reconnected``: see ``outage.py``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

import redis

from ..errors import CorruptQueue
from .outage import OUTAGE_ERRORS, Outage

if TYPE_CHECKING:
    from ..broker.roles import CleanupRole
    from ..periodic import Scheduler

log = logging.getLogger("taskforge.worker")

RECLAIM_EVERY = 1.0
HEARTBEAT_EVERY = 2.0  # how fresh `taskforge status` is about workers
RENEW_RETRY = 0.5
# An idle worker has nothing to renew and nothing new to say, so it reclaims
# and beats less often: with one waiter per child, a whole idle worker sends
# about 1.5 commands/s. A dead worker's jobs still come back within a lease
# and a few seconds, and the listing's entry lives 10 x HEARTBEAT_EVERY.
IDLE_RECLAIM_EVERY = 5.0
IDLE_HEARTBEAT_EVERY = 6.0

# Seconds of each reclaim tick a worker may spend sweeping one queue's index
# when it is behind, in calls of a few milliseconds each (Redis serves other
# clients between them): each finished job costs the sweep 10 to 40 µs of
# Redis time on a small machine, so 0.2 s a second keeps up with several
# thousand jobs finishing per second per worker, more than one queue runs.
SWEEP_BUDGET = 0.2
IDLE_SWEEP_EVERY = 60.0
# Seconds with no job held and none finished before a worker counts as idle:
# a reclaim's period, so a worker that finished nothing since its last
# reclaim slows down at once (an idle worker's commands a second count).
IDLE_AFTER = RECLAIM_EVERY

Duty = Callable[[], object]


class DamageLog:
    """Says each damaged queue once: the duties meet the same damage every second."""

    def __init__(self) -> None:
        self.seen: set[str] = set()

    def report(self, exc: CorruptQueue) -> None:
        if str(exc) not in self.seen:
            self.seen.add(str(exc))
            log.error("%s", exc)


class Activity:
    """Whether a worker is idle: no job held and none finished for ``IDLE_AFTER`` seconds.

    Asking changes nothing but the time of the last work seen, so the tick
    and the reclaim's sweeper, which ask within the same moment, get one
    answer. (An answer that consumed "finished since I last asked" made the
    second asker see an idle worker on every tick of a busy one: its sweep
    fell to once a minute and its index grew with the jobs it ran.)
    """

    def __init__(
        self, done: Callable[[], int], holding: Callable[[], bool], clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.done = done  # jobs finished so far
        self.holding = holding  # a job running or an outcome not yet recorded
        self.clock = clock
        self.seen_done = 0
        self.busy_at = float("-inf")

    def __call__(self) -> bool:
        now = self.clock()
        done = self.done()
        if done != self.seen_done or self.holding():
            self.seen_done = done
            self.busy_at = now
        return now - self.busy_at >= IDLE_AFTER


class Sweeper:
    """The index entries of each queue's expired records (``Cleanup.sweep``), after each reclaim.

    Each reclaim sweeps one slice itself. A busy worker then sweeps on
    while slices come back full, within ``SWEEP_BUDGET``; an idle one (no
    job held) calls only for a queue it left behind, and once a minute, so
    that an idle worker's cost stays a reclaim every few seconds.
    """

    def __init__(self, cleanup: CleanupRole, damage: DamageLog, budget: float = SWEEP_BUDGET) -> None:
        self.cleanup = cleanup
        self.damage = damage
        self.budget = budget
        self.behind: set[str] = set()  # queues whose last sweep stopped with more due
        self.next_idle = 0.0

    def run(self, queues: Iterable[str], idle: bool, now: float) -> None:
        check = not idle or now >= self.next_idle
        if check:
            self.next_idle = now + IDLE_SWEEP_EVERY
        for queue in queues:
            if not check and queue not in self.behind:
                continue
            try:
                _, more = self.cleanup.sweep(queue, self.budget)
            except CorruptQueue as exc:  # a damaged queue is said once
                self.damage.report(exc)
                continue
            if more:
                self.behind.add(queue)
            else:
                self.behind.discard(queue)


class Housekeeping:
    """Runs the duties when they are due; ``run`` is also the safe way to run one-off Redis work."""

    def __init__(
        self,
        renew: Duty,
        reclaim: Duty,
        beat: Duty,
        scheduler: Scheduler | None,
        renew_every: float,
        damage: DamageLog,
        outage: Outage,
        idle: Callable[[], bool] = lambda: False,
    ) -> None:
        self.renew = renew
        self.reclaim = reclaim
        self.beat = beat
        self.scheduler = scheduler
        self.renew_every = renew_every
        self.damage = damage
        self.outage = outage
        self.idle = idle  # no job held: the slow rates apply
        self.next_renew = self.next_beat = self.next_reclaim = 0.0

    def start(self, now: float) -> None:
        """Renew and beat on the first tick; the reclaim at start-up has just run."""
        self.next_renew = self.next_beat = 0.0
        self.next_reclaim = now + RECLAIM_EVERY

    def tick(self, now: float, stopping: bool) -> None:
        if now >= self.next_renew:
            # After a failed renewal, retry soon, and reclaim nothing until
            # it works: after an outage this worker's own live jobs may look
            # expired, and must be renewed before anyone's reclaim runs.
            renewed = self.run(self.renew, proves=False)  # with no job held, it sends nothing
            self.next_renew = now + (self.renew_every if renewed else RENEW_RETRY)
            if not renewed:
                self.next_reclaim = max(self.next_reclaim, self.next_renew)
        idle = self.idle()
        if now >= self.next_reclaim:
            self.run(self.reclaim)
            self.next_reclaim = now + (IDLE_RECLAIM_EVERY if idle else RECLAIM_EVERY)
        if now >= self.next_beat:
            self.run(self.beat)
            self.next_beat = now + (IDLE_HEARTBEAT_EVERY if idle else HEARTBEAT_EVERY)
        # During an outage the scheduler would warn on every tick; it catches
        # up with the latest tick once the reclaim or the heartbeat gets through.
        if self.scheduler is not None and not stopping and not self.outage.down:
            try:
                self.run(self.scheduler.run_due, proves=False)
            except Exception:  # a broken schedule must not stop the worker from running jobs
                log.exception("the periodic scheduler failed; it will try again")

    def run(self, action: Duty, proves: bool = True) -> bool:
        """Periodic Redis work must never bring the supervisor down; True if it worked.

        ``proves``: the action always sends a command, so its success means
        Redis is back (the renewal sends none when no job is held).
        """
        try:
            action()
            if proves:
                self.outage.answered()
            return True
        except OUTAGE_ERRORS as exc:
            self.outage.failed(exc)
        except CorruptQueue as exc:
            self.damage.report(exc)
        except (redis.RedisError, redis.exceptions.RedisClusterException) as exc:
            log.error("%s failed: %s; will retry", getattr(action, "__name__", action), exc)
        return False
