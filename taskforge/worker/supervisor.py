"""The parent process: spawn children, renew their leases, enforce timeouts, recover.

Children are started with ``spawn``, not ``fork``: each imports the app
afresh (as SPEC says), and none inherits the supervisor's Redis sockets,
threads or held locks, the classic source of forked-worker deadlocks.

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
  seconds, then are killed and their jobs go back to the queue unrun,
  without using an attempt. A second signal skips the grace period.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import signal
import time
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from typing import TYPE_CHECKING, Any

import redis

from ..errors import BrokerUnavailable, CorruptQueue, TaskforgeError
from ..handle import JobHandle
from ..periodic import Scheduler
from .child import EXIT_RECYCLE, ChildConfig, child_main
from .registry import WorkerRegistry
from .runner import notify_failure, retry_delay

if TYPE_CHECKING:
    from ..app import TaskForge
    from ..metrics import WorkerMetrics

log = logging.getLogger("taskforge.worker")

TICK = 0.25
# After a child's message wakes the loop, let more arrive before reading: a
# busy child sends one per job, and a supervisor woken thousands of times a
# second takes a core's worth of CPU from the children on a small machine.
# Nothing waits on these messages (children talk to Redis themselves), and a
# child's death is still seen at once: its sentinel is not delayed.
MESSAGE_BATCH = 0.02
RECLAIM_EVERY = 1.0
HEARTBEAT_EVERY = 2.0  # how fresh `taskforge status` is about workers
# An idle child reports every second, but one Redis call may legitimately take
# 3 tries x (connect + socket timeout) during an outage: only silence well past
# that means a hung loop.
WATCHDOG_SILENCE = 90.0
RENEW_RETRY = 0.5
ABORT_CHECK_EVERY = 1.0
RESPAWN_BACKOFF_CAP = 10.0


@dataclass
class Running:
    job_id: str
    token: str
    queue: str
    task: str
    attempts: int
    timeout: float | None
    started: float = field(default_factory=time.monotonic)
    timed_out: bool = False
    give_back: bool = False
    aborted: bool = False


@dataclass
class ChildSlot:
    index: int
    process: BaseProcess
    pipe: Connection
    started: float = field(default_factory=time.monotonic)
    last_seen: float = field(default_factory=time.monotonic)
    lanes: dict[int, Running] = field(default_factory=dict)  # lane -> the job it runs (one lane per thread)
    killed: bool = False
    recycling: bool = False  # the child said it reached --max-jobs-per-child
    kill_target: str | None = None  # the job a timeout or abort kill was meant for


@dataclass(frozen=True)
class WorkerOptions:
    concurrency: int
    queues: tuple[str, ...]
    visibility_timeout: float = 60.0
    grace: float = 30.0
    burst: bool = False
    max_jobs_per_child: int = 0
    log_level: str = "info"
    periodic: bool = True
    threads: int = 1


def describe_exit(code: int | None) -> str:
    if code is None:
        return "did not exit"
    if code < 0:
        try:
            return f"was killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


class Supervisor:
    def __init__(
        self, app: TaskForge, app_spec: str, options: WorkerOptions, metrics: WorkerMetrics | None = None
    ) -> None:
        self.app = app
        self.metrics = metrics
        self.spec = app_spec
        self.options = options
        self.lease_ms = int(options.visibility_timeout * 1000)
        # At least every second: renewal is also how an abort() reaches a running job.
        self.renew_every = max(0.1, min(ABORT_CHECK_EVERY, options.visibility_timeout / 3))
        self.ctx = multiprocessing.get_context("spawn")
        self.children: dict[int, ChildSlot] = {}
        self.respawn_at: dict[int, float] = {}
        self.crash_streak: dict[int, int] = {}
        self.unsettled: list[tuple[Running, int | None]] = []
        self.lost_once: set[tuple[str, str, str]] = set()  # claims the last renewal found lost
        self.scheduler = Scheduler(app.schedules) if options.periodic and app.schedules else None
        self.stopping = False
        self.stop_deadline = 0.0
        self.jobs_done = 0
        self.damage_seen: set[str] = set()
        self.registry = WorkerRegistry(
            app.broker.client, list(options.queues), options.concurrency * options.threads, ttl=10 * HEARTBEAT_EVERY
        )

    # -- signals ---------------------------------------------------------

    def on_signal(self, signum: int, _frame: Any) -> None:
        now = time.monotonic()
        if not self.stopping:
            log.info(
                "received %s: stopping; running jobs get %.0f s to finish",
                signal.Signals(signum).name,
                self.options.grace,
            )
            self.stopping = True
            self.app.hooks.emit("worker_stopping")
            self.stop_deadline = now + self.options.grace
            for slot in self.children.values():
                self.signal_child(slot, signal.SIGTERM)
        else:
            log.info("received %s again: stopping now", signal.Signals(signum).name)
            self.stop_deadline = now

    @staticmethod
    def signal_child(slot: ChildSlot, signum: int) -> None:
        try:
            if slot.process.pid:
                os.kill(slot.process.pid, signum)
        except ProcessLookupError:
            pass

    # -- children --------------------------------------------------------

    def spawn(self, index: int) -> None:
        reader, writer = self.ctx.Pipe(duplex=False)
        config = ChildConfig(
            app_spec=self.spec,
            queues=self.options.queues,
            lease_ms=self.lease_ms,
            burst=self.options.burst,
            max_jobs=self.options.max_jobs_per_child,
            log_level=self.options.log_level,
            index=index,
            supervisor_pid=os.getpid(),
            report_outcomes=self.metrics is not None,
            threads=self.options.threads,
        )
        process = self.ctx.Process(target=child_main, args=(config, writer), name=f"taskforge-child-{index}")
        process.start()
        writer.close()
        self.children[index] = ChildSlot(index, process, reader)

    def read_messages(self, slot: ChildSlot) -> None:
        try:
            while slot.pipe.poll():
                message = slot.pipe.recv()
                slot.last_seen = time.monotonic()
                kind = message[0]
                # A lane says "start" for each job, and "idle" when it has none:
                # either one means the lane's job before it is over.
                if kind == "recycle":
                    slot.recycling = True
                if kind in ("start", "idle") and slot.lanes.pop(message[1], None) is not None:
                    self.jobs_done += 1
                if kind == "start":
                    _, lane, job_id, token, queue, task, attempts, timeout = message
                    slot.lanes[lane] = Running(job_id, token, queue, task, attempts, timeout)
                    if self.metrics is not None:
                        self.metrics.started(queue, task)
                elif kind == "done" and self.metrics is not None and message[1] in slot.lanes:
                    running = slot.lanes[message[1]]
                    self.metrics.finished(running.queue, running.task, message[2], message[3])
        except (EOFError, OSError):
            pass

    def reap(self, slot: ChildSlot) -> None:
        """A child process ended: settle its job, then start a replacement if needed."""
        slot.process.join(timeout=1)
        code = slot.process.exitcode
        del self.children[slot.index]
        slot.pipe.close()
        held = list(slot.lanes.values())
        for running in held:
            if slot.kill_target is not None and not (running.timed_out or running.aborted):
                # Killed for another job's timeout or abort (another lane's, or the job
                # before this one, just as it started): not its fault.
                running.give_back = True
            self.unsettled.append((running, code))
        if held:
            self.settle_pending()
        finished_cleanly = code == 0 and not held
        # Only a child that said so was recycled: a task can call os._exit(3) too.
        recycled = slot.recycling and code == EXIT_RECYCLE and not held
        if self.stopping or (self.options.burst and finished_cleanly):
            return
        lived = time.monotonic() - slot.started
        streak = 0 if lived > 5 else self.crash_streak.get(slot.index, 0) + 1
        self.crash_streak[slot.index] = streak
        if recycled:
            streak = 0
        delay = 0.0 if streak <= 1 else min(RESPAWN_BACKOFF_CAP, 0.5 * 2 ** (streak - 2))
        if code != 0 and not recycled and not slot.killed:
            log.warning("child %d (pid %s) %s; starting a new one", slot.index, slot.process.pid, describe_exit(code))
        if self.metrics is not None and not finished_cleanly:
            self.metrics.child_restarted("recycled" if recycled else "killed" if slot.killed else "crashed")
        self.respawn_at[slot.index] = time.monotonic() + delay

    def settle_pending(self) -> None:
        """Record the outcome of jobs whose child died, without ever blocking the loop.

        During an outage they wait here and are retried every tick; their
        leases are still renewed meanwhile (renew_leases includes them), so no
        other worker reclaims them first.
        """
        still = []
        for running, code in self.unsettled:
            try:
                self.settle(running, code)
            except BrokerUnavailable:
                still.append((running, code))
            except (CorruptQueue, redis.RedisError) as exc:
                log.error(
                    "cannot record the outcome of %s (%s); its lease will expire and it will be reclaimed",
                    running.job_id,
                    exc,
                )
        self.unsettled = still

    def settle(self, running: Running, code: int | None) -> None:
        broker = self.app.broker
        if running.give_back:
            broker.requeue(running.queue, running.job_id, running.token)
            log.info("%s %s went back to its queue unrun", running.task, running.job_id)
            return
        if running.aborted:
            broker.abandon(running.queue, running.job_id, running.token)
            log.info("%s %s aborted: its child was stopped", running.task, running.job_id)
            return
        if running.timed_out:
            error = f"TimeoutError: the job ran longer than its timeout of {running.timeout:g} s and was killed"
        else:
            error = f"WorkerCrashed: the child process running this job {describe_exit(code)}"
        delay = retry_delay(self.app, running.task, running.attempts)
        state = broker.fail(running.queue, running.job_id, running.token, error, "", delay)
        if self.metrics is not None:
            self.metrics.finished(running.queue, running.task, state, time.monotonic() - running.started)
        log.warning("%s %s attempt %d %s: %s", running.task, running.job_id, running.attempts, state, error)
        if self.app.hooks.handlers["job_failed"] or self.app.hooks.handlers["job_dead"]:
            with contextlib.suppress(TaskforgeError):
                info = JobHandle(self.app, running.job_id, running.queue).info()
                notify_failure(self.app, info, state, error)

    # -- periodic duties -------------------------------------------------

    def enforce_timeouts(self, now: float) -> None:
        for slot in self.children.values():
            self.read_messages(slot)  # the job may have just ended, and another started
            late = [r for r in slot.lanes.values() if r.timeout and not r.timed_out and now - r.started > r.timeout]
            for running in late:
                running.timed_out = True
            if late:
                slot.killed = True
                slot.kill_target = late[0].job_id
                self.signal_child(slot, signal.SIGKILL)
            elif not slot.lanes and not slot.killed and now - slot.last_seen > WATCHDOG_SILENCE:
                log.warning("child %d silent for %.0f s; replacing it", slot.index, now - slot.last_seen)
                slot.killed = True
                self.signal_child(slot, signal.SIGKILL)

    def held(self) -> list[Running]:
        """Every claim this worker must keep alive: running jobs and outcomes not yet recorded."""
        return [r for s in self.children.values() for r in s.lanes.values()] + [r for r, _ in self.unsettled]

    def renew_leases(self) -> None:
        by_queue: dict[str, list[tuple[str, str]]] = {}
        for running in self.held():
            by_queue.setdefault(running.queue, []).append((running.job_id, running.token))
        lost_now: set[tuple[str, str, str]] = set()
        for queue, claims in by_queue.items():
            try:
                lost, aborted = self.app.broker.extend(queue, self.lease_ms, claims)
            except CorruptQueue as exc:
                self.report_damage(exc)
                continue
            tokens = dict(claims)
            lost_now.update((queue, job_id, tokens[job_id]) for job_id in lost)
            if aborted:
                self.stop_aborted(set(aborted))
        self.report_lost(lost_now)

    def report_lost(self, lost_now: set[tuple[str, str, str]]) -> None:
        """Warn about claims (queue, id, token) found lost by two renewals in a row.

        A child records its job and only then tells us it moved on, so a
        renewal landing in between finds the job finished, or already retried
        and claimed again, and calls the claim lost. A claim really taken over
        is still held by its child a renewal later.
        """
        for queue, job_id, _ in sorted(lost_now & self.lost_once):
            log.warning(
                "%s in %s: this worker no longer holds its claim (its lease expired and the job was reclaimed)",
                job_id,
                queue,
            )
        self.lost_once = lost_now

    def stop_aborted(self, job_ids: set[str]) -> None:
        for slot in self.children.values():
            hit = [r for r in slot.lanes.values() if r.job_id in job_ids]
            if hit and not slot.killed:
                for running in hit:
                    running.aborted = True
                slot.killed = True
                slot.kill_target = hit[0].job_id
                self.signal_child(slot, signal.SIGKILL)

    def heartbeat(self) -> None:
        current = [
            {
                "id": r.job_id,
                "task": r.task,
                "queue": r.queue,
                "started_at": int((time.time() - (time.monotonic() - r.started)) * 1000),
            }
            for s in self.children.values()
            for r in s.lanes.values()
        ]
        self.registry.beat(current, self.jobs_done)

    def reclaim(self) -> None:
        for queue in self.options.queues:
            try:
                back, buried, dropped = self.app.broker.reclaim(queue)
            except CorruptQueue as exc:
                # The other queues are still served; the damage is said once, not every second.
                self.report_damage(exc)
                continue
            if self.metrics is not None:
                self.metrics.reclaimed(queue, len(back) + len(buried))
            for job_id in back:
                log.warning("reclaimed %s in %s: its worker stopped renewing the lease", job_id, queue)
            for job_id in buried:
                log.warning("%s in %s is dead: its worker was lost on the last attempt", job_id, queue)
            if dropped:
                log.warning("dropped %d expired claims without a job record in %s", dropped, queue)

    def register_limits(self) -> None:
        by_queue: dict[str, dict[str, str]] = {}
        for task in self.app.tasks.values():
            by_queue.setdefault(task.queue, {})[task.name] = task.options.limits
        for queue, limits in by_queue.items():
            self.app.broker.register_limits(queue, limits)

    def shutdown_step(self, now: float) -> None:
        if now < self.stop_deadline:
            return
        for slot in self.children.values():
            if not slot.killed:
                for running in slot.lanes.values():
                    running.give_back = True
                slot.killed = True
                self.signal_child(slot, signal.SIGKILL)

    # -- main loop -------------------------------------------------------

    def run(self) -> int:
        signal.signal(signal.SIGTERM, self.on_signal)
        signal.signal(signal.SIGINT, self.on_signal)
        opts = self.options
        log.info(
            "worker %s: %d children on queues %s (pid %d)",
            self.registry.id,
            opts.concurrency,
            ", ".join(opts.queues),
            os.getpid(),
        )
        self.duty(self.reclaim)
        self.duty(self.register_limits)
        self.app.hooks.emit("worker_started")
        try:
            for index in range(opts.concurrency):
                self.spawn(index)
            self.loop()
        finally:
            # Whatever went wrong, never leave children running without a
            # supervisor renewing their leases: that would run jobs twice.
            for slot in self.children.values():
                self.signal_child(slot, signal.SIGKILL)
        if not self.stopping:  # burst mode ran out of work
            self.app.hooks.emit("worker_stopping")
        self.duty(self.registry.remove)
        log.info("worker %s stopped after %d jobs", self.registry.id, self.jobs_done)
        return 0

    def loop(self) -> None:
        self.next_renew = self.next_beat = 0.0
        self.next_reclaim = time.monotonic() + RECLAIM_EVERY
        while self.children or self.unsettled or (self.respawn_at and not self.stopping):
            self.loop_once()
            now = time.monotonic()
            self.enforce_timeouts(now)
            if self.unsettled:
                self.settle_pending()
            self.respawn_due(now)
            self.periodic_duties(now)
            if self.stopping:
                self.shutdown_step(now)
                if self.unsettled and self.gave_up():
                    log.warning(
                        "%d job outcomes not recorded before shutdown; their leases will expire "
                        "and they will be reclaimed",
                        len(self.unsettled),
                    )
                    self.unsettled = []

    def respawn_due(self, now: float) -> None:
        for index, when in list(self.respawn_at.items()):
            if now >= when:
                del self.respawn_at[index]
                if not self.stopping:
                    self.spawn(index)

    def periodic_duties(self, now: float) -> None:
        if now >= self.next_renew:
            # After a failed renewal, retry soon, and reclaim nothing until
            # it works: after an outage this worker's own live jobs may look
            # expired, and must be renewed before anyone's reclaim runs.
            renewed = self.duty(self.renew_leases)
            self.next_renew = now + (self.renew_every if renewed else RENEW_RETRY)
            if not renewed:
                self.next_reclaim = max(self.next_reclaim, self.next_renew)
        if now >= self.next_reclaim:
            self.duty(self.reclaim)
            self.next_reclaim = now + RECLAIM_EVERY
        if now >= self.next_beat:
            self.duty(self.heartbeat)
            self.next_beat = now + HEARTBEAT_EVERY
        if self.scheduler is not None and not self.stopping:
            try:
                self.duty(self.scheduler.run_due)
            except Exception:  # a broken schedule must not stop the worker from running jobs
                log.exception("the periodic scheduler failed; it will try again")

    def gave_up(self) -> bool:
        """Past the grace period of a shutdown, stop retrying writes: leases expire instead."""
        return self.stopping and time.monotonic() >= self.stop_deadline

    def loop_once(self) -> None:
        slots = list(self.children.values())
        waitables: list[Any] = [s.pipe for s in slots] + [s.process.sentinel for s in slots]
        ready = set(wait(waitables, timeout=TICK)) if waitables else set()
        if not waitables:
            time.sleep(TICK)
        if ready and not any(s.process.sentinel in ready for s in slots) and not self.stopping:
            time.sleep(MESSAGE_BATCH)
        for slot in slots:
            if slot.pipe in ready or slot.process.sentinel in ready:
                self.read_messages(slot)
            if slot.process.sentinel in ready:
                self.reap(slot)

    def report_damage(self, exc: CorruptQueue) -> None:
        if str(exc) not in self.damage_seen:
            self.damage_seen.add(str(exc))
            log.error("%s", exc)

    def duty(self, action: Any) -> bool:
        """Periodic Redis work must never bring the supervisor down; True if it worked."""
        try:
            action()
            return True
        except BrokerUnavailable as exc:
            log.warning("%s; will retry", exc)
        except CorruptQueue as exc:
            self.report_damage(exc)
        except (redis.RedisError, redis.exceptions.RedisClusterException) as exc:
            log.error("%s failed: %s; will retry", getattr(action, "__name__", action), exc)
        return False
