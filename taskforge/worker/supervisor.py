"""The parent process: wires the pool, the leases and the housekeeping together, and handles signals.

Each part does one job (``pool.py`` the children, ``leases.py`` the claims,
``outcomes.py`` the jobs of dead children, ``housekeeping.py`` the periodic
Redis work); this module owns the main loop and the shutdown.

What happens on each failure:

* a child dies (os._exit, segfault, OOM kill): seen at once through its
  process sentinel; its job fails with the exit code or signal (retry or dead
  by the usual rules) and a new child takes the slot;
* a job runs past its ``timeout``: its child is SIGKILLed, the job fails with
  a timeout error, a new child takes the slot;
* a child's loop stops reporting (a hung connection): it is replaced;
* the supervisor itself is SIGKILLed: the children die with it (PDEATHSIG),
  their leases stop being renewed and any other worker reclaims the jobs;
* SIGTERM / SIGINT: children stop taking jobs, running ones get ``grace``
  seconds, then are killed and their jobs go back to the queue recorded
  as interrupted, without using an attempt. A second signal skips the grace period;
* SIGHUP: a warm restart (``restart.py``): every child finishes its running
  jobs and is replaced by a new process; the supervisor and its leases stay.
"""

from __future__ import annotations

import logging
import signal
import time
from typing import TYPE_CHECKING, Any

from ..broker.clock import RedisClock
from ..broker.workers import live_workers
from ..periodic import Scheduler
from .banner import banner
from .foreign import differing_tasks
from .hangup import HUP
from .housekeeping import HEARTBEAT_EVERY, Activity, DamageLog, Housekeeping, Sweeper
from .leases import Leases, renew_every
from .options import WorkerOptions
from .outage import Outage
from .outcomes import PendingOutcomes
from .pool import Pool, Running
from .reconcile import Reconciler
from .registry import WorkerRegistry, owner_tag
from .rescue import Rescue
from .restart import WarmRestart
from .server_watch import ServerWatch
from .ticker import Ticker

if TYPE_CHECKING:
    from ..app import TaskForge
    from ..metrics import WorkerMetrics
    from .forkserver import ForkServer

__all__ = ["Running", "Supervisor", "WorkerOptions"]

log = logging.getLogger("taskforge.worker")


class Supervisor:
    def __init__(
        self,
        app: TaskForge,
        app_spec: str,
        options: WorkerOptions,
        metrics: WorkerMetrics | None = None,
        forks: ForkServer | None = None,
    ) -> None:
        self.app = app
        self.app_spec = app_spec
        self.options = options
        self.stop_deadline = 0.0
        self.signals = 0  # SIGTERM/SIGINT received so far
        owner = owner_tag()
        self.pool = Pool(app_spec, options, metrics, owner)
        self.pool.starter.adopt(forks)  # the children are forked from it while it lasts (``forkserver.py``)
        self.outcomes = PendingOutcomes(app, metrics)
        self.damage = DamageLog()
        self.idle = Activity(lambda: self.pool.jobs_done, lambda: any(self.pool.running()) or bool(self.outcomes))
        self.sweeper = Sweeper(app.broker.cleanup, self.damage)
        self.leases = Leases(app.broker.claims, options.lease_ms, self.damage.report, metrics)
        self.clock = RedisClock(app.broker.client)  # what decides shared things: Redis's time, not this host's
        self.registry = WorkerRegistry(
            app.broker.client,
            list(options.queues),
            options.concurrency * options.threads,
            ttl=10 * HEARTBEAT_EVERY,
            tasks=app.tasks,
            keep=options.lease_ms / 1000,
            owner=owner,
            clock=self.clock,
        )
        self.pool.worker_id = self.registry.id
        scheduler = Scheduler(app.schedules, self.clock) if options.periodic and app.schedules else None
        outage = Outage(app.url)
        # Ticks are taken on their own thread, on time whatever the loop does (ticker.py).
        self.ticker = Ticker(scheduler, outage, lambda: self.stopping) if scheduler is not None else None
        self.housekeeping = Housekeeping(
            self.renew_leases,
            self.reclaim,
            self.heartbeat,
            None,
            renew_every(options.visibility_timeout),
            self.damage,
            outage,
            idle=self.idle,
        )
        self.woken = False  # idle children woken once a stop began
        self.reconciler = Reconciler(app.broker, list(options.queues))
        self.rescue = Rescue(app.broker.claims, app.broker.client, self.registry.id)
        self.server_watch = ServerWatch(app, self.leases, self.held, self.register_limits)
        self.restart = WarmRestart(self.pool)

    @property
    def stopping(self) -> bool:
        return self.pool.stopping

    def on_signal(self, signum: int, _frame: Any) -> None:
        """The first SIGTERM/SIGINT starts a graceful stop; any later one stops now.

        Counted before anything else: Python may run this handler again
        inside itself (a second signal arriving while the first is logged or
        its hook runs), and that second signal must not be taken for a first
        and given the whole grace period.
        """
        self.signals += 1
        if self.signals > 1 or self.stopping:
            log.info("received %s again: stopping now", signal.Signals(signum).name)
            self.stop_deadline = time.monotonic()
            return
        self.pool.stopping = True  # before the hook runs: no child is started again from here on
        log.info(
            "received %s: stopping; running jobs get %.0f s to finish",
            signal.Signals(signum).name,
            self.options.grace,
        )
        self.app.hooks.emit("worker_stopping")
        grace = self.options.grace if self.signals == 1 else 0.0  # a second one came meanwhile: now
        self.stop_deadline = time.monotonic() + grace
        self.pool.stop()

    # -- duties: what the housekeeping runs, wired to the parts that know ----

    def held(self) -> list[Running]:
        """Every claim this worker must keep alive: running jobs, jobs of a batch not started yet,
        and outcomes not yet recorded."""
        return [*self.pool.running(), *self.pool.unstarted(), *self.outcomes.held()]

    def wake_children(self) -> None:
        """A stop began: wake this worker's idle children from their long block on the wake list.

        Only a hint (another worker may take a token first; then the child
        sees the stop when its block times out), and harmless to others: a
        woken waiter claims nothing it would not have claimed anyway.
        """
        tokens = ["1"] * len(self.pool.children)
        if tokens:
            pipe = self.app.broker.client.pipeline(transaction=False)
            for key in self.app.broker.claims.wake_keys(self.options.queues):
                pipe.lpush(key, *tokens)
            pipe.execute()

    def renew_leases(self) -> None:
        self.leases.renew(self.held(), self.pool.stop_aborted)

    def reclaim(self) -> None:
        """Expired claims back in line, expired records' index entries swept, then what a crash left undone.

        Every few seconds, first the claims of this host's workers proved dead (``rescue.py``).
        """
        rescued = self.rescue.run() if self.rescue.due(time.monotonic()) else set()
        if self.server_watch.due(time.monotonic()):
            self.server_watch.check()  # settings that can lose jobs, and a restart (``server_watch.py``)
        self.leases.reclaim([*self.options.queues, *sorted(rescued - set(self.options.queues))])
        self.sweeper.run(self.options.queues, self.idle(), time.monotonic())
        self.reconciler.run()

    def check_clock(self) -> None:
        """Say once, at start, when this host's clock is off Redis's by more than a few seconds."""
        self.clock.sync()
        skew = self.clock.skew_text()
        if skew:
            log.warning("%s", skew)

    def heartbeat(self) -> None:
        self.registry.beat(self.pool.running(), self.pool.jobs_done, self.pool.pids())

    def compare_tasks(self) -> None:
        """Warn, once at start, when live workers on this worker's queues serve other tasks (``foreign.py``)."""
        listing = live_workers(self.app.broker.client)
        warning = differing_tasks(self.registry.id, list(self.options.queues), set(self.app.tasks), listing)
        if warning:
            log.warning("%s", warning)

    def register_limits(self) -> None:
        """Publish this worker's task limits, so jobs sent by name obey them too."""
        by_queue: dict[str, dict[str, str]] = {}
        for task in self.app.tasks.values():
            by_queue.setdefault(task.queue, {})[task.name] = task.options.limit_text
        for queue, limits in by_queue.items():
            self.app.broker.claims.register_limits(queue, limits)

    # -- main loop -------------------------------------------------------

    def run(self) -> int:
        signal.signal(signal.SIGTERM, self.on_signal)
        signal.signal(signal.SIGINT, self.on_signal)
        if HUP is not None:
            signal.signal(HUP, self.restart.on_signal)
        log.info("%s", banner(self.app, self.app_spec, self.registry.id, self.options))
        self.housekeeping.run(self.register_limits)  # before any claim: a job sent by name obeys them too
        self.app.hooks.emit("worker_started")
        try:
            # The children first, the other checks meanwhile: none of them need hold the first job back.
            self.pool.start()
            # Listed with its children's pids before they can claim much (they start in milliseconds):
            # a worker started here after a kill -9 proves them gone from this entry (``rescue.py``).
            self.housekeeping.run(self.heartbeat)
            self.housekeeping.run(self.check_clock)
            self.housekeeping.run(self.compare_tasks)
            self.housekeeping.run(self.reclaim)
            if self.ticker is not None:
                self.ticker.start()
            self.loop()
        finally:
            if self.ticker is not None:
                self.ticker.stop()
            # Whatever went wrong, never leave children running without a
            # supervisor renewing their leases: that would run jobs twice.
            self.pool.kill_now()
            self.pool.starter.close_forks()
        if not self.stopping:  # burst mode ran out of work
            self.app.hooks.emit("worker_stopping")
        self.housekeeping.run(self.registry.remove)
        log.info("worker %s stopped after %d jobs", self.registry.id, self.pool.jobs_done)
        return 0

    def loop(self) -> None:
        self.housekeeping.start(time.monotonic())
        while self.pool.active() or self.outcomes:
            died = self.pool.watch()
            if died:
                self.outcomes.add(died)
                self.outcomes.settle()
            now = time.monotonic()
            self.pool.enforce_timeouts(now)
            if self.outcomes:
                self.outcomes.settle()
            self.pool.respawn_due(now)
            self.pool.starter.reap_strays(self.pool.pids())
            if self.restart.step():  # a SIGHUP: idle children are woken to see it, as on a stop
                self.housekeeping.run(self.wake_children, proves=False)
            self.housekeeping.tick(now, self.stopping)
            if self.stopping:
                self.shutdown_step(now)

    def shutdown_step(self, now: float) -> None:
        """Past the grace period: kill what still runs, and stop retrying writes (leases expire instead)."""
        if not self.woken:  # here, not in the signal handler: it may interrupt a Redis call of this thread
            self.woken = True
            self.housekeeping.run(self.wake_children, proves=False)
        if now >= self.stop_deadline:
            self.pool.kill_all()
        if self.outcomes and time.monotonic() >= self.stop_deadline:
            self.outcomes.drop()
