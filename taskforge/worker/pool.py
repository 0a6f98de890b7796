"""The supervisor's children: start, listen, reap, respawn, and kill when a job must stop.

Children are forked from the fork server (``forkserver.py``), a copy of the supervisor made
before any thread or socket existed, or else started with ``spawn`` (docs/worker-model.md,
"Process model"): none inherits the supervisor's Redis sockets, threads or held locks.

The pool knows which job each lane of each child runs, from the children's
messages, because everything the supervisor does from outside depends on
it: leases are renewed for those jobs, a job past its timeout gets its
child killed, and a child's death is charged to the jobs it held. It never
talks to Redis: what a dead child held is handed back to be recorded.

An async job (one on a child's event loop, known by its slot id) is not
killed for its timeout or an abort: the child is asked to cancel it (a
``CancelJob`` on the control pipe) and is killed, as for a lane's job,
only if the job has not ended ``CANCEL_GRACE`` seconds later; the child's
other jobs then go back to their queues unrun, their attempt refunded.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from typing import TYPE_CHECKING, Any

from .aio_run import ABORT, SOFT, TIMEOUT
from .board import LaneBatches
from .child import ChildConfig
from .hangup import hup_blocked
from .joblog import describe_exit
from .lane import EXIT_RECYCLE
from .messages import (
    CancelJob,
    Heartbeat,
    JobFinished,
    JobStarted,
    LaneIdle,
    LoopBlocked,
    Message,
    Recycling,
    Released,
    from_wire,
)
from .options import WorkerOptions
from .starter import ChildProcess, Starter

if TYPE_CHECKING:
    from ..metrics import WorkerMetrics

log = logging.getLogger("taskforge.worker")

TICK = 0.25
# After a child's message wakes the loop, let more arrive before reading: a
# busy child sends one per job, and a supervisor woken thousands of times a
# second takes a core's worth of CPU from the children on a small machine.
# Nothing waits on these messages (children talk to Redis themselves), and a
# child's death is still seen at once: its sentinel is not delayed.
MESSAGE_BATCH = 0.02
# An idle child reports every second, but one Redis call may legitimately take
# 3 tries x (connect + socket timeout) during an outage: only silence well past
# that means a hung loop.
WATCHDOG_SILENCE = 90.0
RESPAWN_BACKOFF_CAP = 10.0
# A child that dies younger than this counts towards a crash streak, which
# delays its replacement: a task that kills every child must not fork-bomb.
SHORT_LIFE = 5.0
# An async job asked to stop (timeout, abort) has this long to end, cleanup included, before its child is killed.
CANCEL_GRACE = 3.0


@dataclass
class Running:
    """A job one lane of a child runs, and what the supervisor decided about it."""

    job: JobStarted  # what the lane said of the job: id, claim token, queue, task, attempt, timeout
    started: float = field(default_factory=time.monotonic)
    timed_out: bool = False
    give_back: bool = False
    interrupted: bool = False  # a shutdown's grace ran out: given back, recorded as cut short (it ran)
    outcome_unknown: bool = False  # ran and passed in a batch whose child died: its success may be unrecorded
    aborted: bool = False
    cancel_sent: float | None = None  # when the child was asked to cancel this async job
    soft_sent: bool = False  # the child was told this job ran past its soft timeout

    def soft_due(self, now: float) -> bool:
        """Past its soft timeout, and its child not told yet."""
        soft = self.job.soft_timeout
        return soft is not None and soft > 0 and not self.soft_sent and now - self.started > soft

    def overdue(self, now: float) -> bool:
        """Past its timeout and not yet killed for it."""
        timeout = self.job.timeout
        return timeout is not None and timeout > 0 and not self.timed_out and now - self.started > timeout


@dataclass
class ChildSlot:
    index: int
    process: ChildProcess
    pipe: Connection
    started: float = field(default_factory=time.monotonic)
    last_seen: float = field(default_factory=time.monotonic)
    lanes: dict[int, Running] = field(default_factory=dict)  # lane -> the job it runs (one lane per thread)
    batches: LaneBatches = field(default_factory=lambda: LaneBatches(None))  # the lanes' batches (``board.py``)
    killed: bool = False
    recycling: bool = False  # the child said it reached --max-jobs-per-child or --max-memory-per-child
    restarting: bool = False  # asked to go by a warm restart (SIGHUP, ``restart.py``)
    kill_target: str | None = None  # the job a timeout or abort kill was meant for
    control: Connection | None = None  # supervisor -> child: CancelJob for async jobs

    def kill(self, target: str | None = None) -> None:
        self.killed = True
        if target is not None:
            self.kill_target = target
        signal_child(self, signal.SIGKILL)


Died = tuple[Running, int | None]  # a job whose child ended, and the child's exit code


def signal_child(slot: ChildSlot, signum: int) -> None:
    """Signal a child that has not been reaped yet, never a pid it has given back.

    multiprocessing reaps every ended child whenever another starts, before
    ``reap`` sees it: by then its pid is free and, on a busy machine, may be
    another process's. ``exitcode`` is None only while the child is unreaped
    (alive, or a zombie this process alone can reap), so its pid is still its own.
    """
    try:
        if slot.process.pid and slot.process.exitcode is None:
            os.kill(slot.process.pid, signum)
    except ProcessLookupError:
        pass


class Pool:
    """The child processes of one worker and the jobs their lanes run."""

    def __init__(
        self, app_spec: str, options: WorkerOptions, metrics: WorkerMetrics | None = None, owner: str = ""
    ) -> None:
        self.spec = app_spec
        self.owner = owner  # the prefix of every claim token of this worker's children
        self.worker_id = ""  # the worker's registry id, set by the supervisor: the children's current_job().worker_id
        self.options = options
        self.metrics = metrics
        self.starter = Starter(options.threads)  # forks the children, or spawns them (``starter.py``)
        self.children: dict[int, ChildSlot] = {}
        self.respawn_at: dict[int, float] = {}
        self.crash_streak: dict[int, int] = {}
        self.stopping = False
        self.jobs_done = 0

    def pids(self) -> list[int]:
        """The children's pids, for the worker's listing: what proves them gone after a kill -9."""
        return [slot.process.pid for slot in self.children.values() if slot.process.pid]

    def running(self) -> Iterator[Running]:
        for slot in self.children.values():
            yield from slot.lanes.values()

    def unstarted(self) -> Iterator[Running]:
        """Jobs the children claimed in a batch and have not started yet: their leases too are renewed."""
        for slot in self.children.values():
            yield from (Running(job) for job in slot.batches.unstarted())

    def start(self) -> None:
        for index in range(self.options.concurrency):
            self.spawn(index)

    def spawn(self, index: int) -> None:
        options = self.options
        config = ChildConfig(
            app_spec=self.spec,
            queues=options.queues,
            lease_ms=options.lease_ms,
            burst=options.burst,
            max_jobs=options.max_jobs_per_child,
            max_memory_mb=options.max_memory_per_child,
            log_level=options.log_level,
            index=index,
            supervisor_pid=os.getpid(),
            report_outcomes=self.metrics is not None,
            threads=options.threads,
            async_slots=options.async_slots,
            owner=self.owner,
            prefetch=options.prefetch,
            worker_id=self.worker_id,
        )
        with hup_blocked():  # for the child, and for multiprocessing's resource tracker, started with the board
            process, reader, control_writer, board = self.starter.start(config)
        slot = self.children[index] = ChildSlot(index, process, reader, control=control_writer, batches=board)
        if self.stopping:
            # A SIGTERM handled while this child was being started found no slot for
            # it to signal (and one that reached the child before its exec is lost):
            # tell it now, or it idles on and the worker waits for it forever.
            signal_child(slot, signal.SIGTERM)

    # -- news from the children -----------------------------------------

    def watch(self) -> list[Died]:
        """Wait up to a tick for the children's messages and deaths; the jobs the dead held."""
        slots = list(self.children.values())
        waitables: list[Any] = [s.pipe for s in slots] + [s.process.sentinel for s in slots]
        ready = set(wait(waitables, timeout=TICK)) if waitables else set()
        if not waitables:
            time.sleep(TICK)
        if ready and not any(s.process.sentinel in ready for s in slots) and not self.stopping:
            time.sleep(MESSAGE_BATCH)
        died: list[Died] = []
        for slot in slots:
            if slot.pipe in ready or slot.process.sentinel in ready:
                self.read_messages(slot)
            if slot.process.sentinel in ready:
                died += self.reap(slot)
        return died

    def read_messages(self, slot: ChildSlot) -> None:
        """The child's messages, then its board: the jobs its lanes started within their batches."""
        try:
            while slot.pipe.poll():
                self.on_message(slot, from_wire(slot.pipe.recv()))
        except (EOFError, OSError):
            pass
        self.follow(slot)

    def follow(self, slot: ChildSlot) -> None:
        """The jobs the child's lanes started within their batches, as its board says (``board.py``)."""
        for job, started in slot.batches.advanced():
            self.lane_done(slot, job.lane)
            slot.lanes[job.lane] = Running(job, started=started)
            if self.metrics is not None:
                self.metrics.started(job.queue, job.task)

    def on_message(self, slot: ChildSlot, message: Message | object) -> None:
        slot.last_seen = time.monotonic()  # any message, a Heartbeat included, feeds the watchdog
        match message:
            case JobStarted(lane=lane):
                self.follow(slot)  # what the board says happened before this message
                self.lane_done(slot, lane)
                running = slot.lanes[lane] = Running(message)
                slot.batches.announced(message)
                if self.metrics is not None:
                    self.metrics.started(running.job.queue, running.job.task)
            case LaneIdle(lane=lane):
                self.follow(slot)
                self.lane_done(slot, lane)
                slot.batches.idle(lane)  # the rest of its batch was given back or run
            case JobFinished(lane=lane, state=state, duration=duration):
                done = slot.lanes.get(lane)
                if self.metrics is not None and done is not None:
                    self.metrics.finished(done.job.queue, done.job.task, state, duration)
            case Released(lane=lane, job_ids=job_ids):
                slot.batches.released(lane, job_ids)
            case Recycling():
                slot.recycling = True
            case LoopBlocked(queue=queue, task=task):
                if self.metrics is not None:
                    self.metrics.loop_blocked(queue, task)
            case Heartbeat():
                return
            case _:
                log.warning("child %d sent %r, which this supervisor does not know", slot.index, message)

    def lane_done(self, slot: ChildSlot, lane: int) -> None:
        """A lane said it started a job or has none: either way the job it ran before is over."""
        if slot.lanes.pop(lane, None) is not None:
            self.jobs_done += 1

    # -- deaths and replacements -----------------------------------------

    def reap(self, slot: ChildSlot) -> list[Died]:
        """A child process ended: hand back its jobs, and plan its replacement if one is needed."""
        slot.process.join(timeout=1)
        code = slot.process.exitcode
        del self.children[slot.index]
        slot.pipe.close()
        if slot.control is not None:
            slot.control.close()
        held = list(slot.lanes.values())
        for running in held:
            if slot.kill_target is not None and not (running.timed_out or running.aborted):
                # Killed for another job's timeout or abort (another lane's, or the job
                # before this one, just as it started): not its fault.
                running.give_back = True
        unstarted = [Running(job, give_back=True) for job in slot.batches.unstarted()]
        unstarted += [Running(job, outcome_unknown=True) for job in slot.batches.passed()]
        self.plan_respawn(slot, code, bool(held))
        return [(running, code) for running in held + unstarted]

    def plan_respawn(self, slot: ChildSlot, code: int | None, held: bool) -> None:
        finished_cleanly = code == 0 and not held
        # Recycled: said so (a task can os._exit(3) too), or asked by a restart (SIGTERM may find it starting).
        said = slot.recycling and code == EXIT_RECYCLE or slot.restarting and code in (0, EXIT_RECYCLE, -signal.SIGTERM)
        recycled = said and not held
        if self.stopping or (self.options.burst and finished_cleanly and not slot.restarting):
            return
        lived = time.monotonic() - slot.started
        streak = 0 if lived > SHORT_LIFE else self.crash_streak.get(slot.index, 0) + 1
        self.crash_streak[slot.index] = streak
        if recycled:
            streak = 0
        delay = 0.0 if streak <= 1 else min(RESPAWN_BACKOFF_CAP, 0.5 * 2 ** (streak - 2))
        if code != 0 and not recycled and not slot.killed:
            log.warning("child %d (pid %s) %s; starting a new one", slot.index, slot.process.pid, describe_exit(code))
        if self.metrics is not None and not finished_cleanly:
            self.metrics.child_restarted("recycled" if recycled else "killed" if slot.killed else "crashed")
        self.respawn_at[slot.index] = time.monotonic() + delay

    def respawn_due(self, now: float) -> None:
        for index, when in list(self.respawn_at.items()):
            if now >= when:
                del self.respawn_at[index]
                if not self.stopping:
                    self.spawn(index)

    def active(self) -> bool:
        """Children still run, or will be started again."""
        return bool(self.children or (self.respawn_at and not self.stopping))

    # -- kills -------------------------------------------------------------

    def enforce_timeouts(self, now: float) -> None:
        """Kill the children running a job past its timeout (an async job: asked to cancel first), or gone silent."""
        for slot in self.children.values():
            self.read_messages(slot)  # the job may have just ended, and another started
            for running in slot.lanes.values():
                if running.soft_due(now):
                    running.soft_sent = True
                    self.tell(slot, CancelJob(running.job.job_id, SOFT))
            late = [r for r in slot.lanes.values() if r.overdue(now)]
            for running in late:
                running.timed_out = True
            to_kill = [r for r in late if not self.cancel(slot, r, TIMEOUT, now)]
            to_kill += [r for r in slot.lanes.values() if r.cancel_sent and now - r.cancel_sent > CANCEL_GRACE]
            if to_kill and not slot.killed:
                slot.kill(to_kill[0].job.job_id)
            elif not slot.lanes and not slot.killed and now - slot.last_seen > WATCHDOG_SILENCE:
                log.warning("child %d silent for %.0f s; replacing it", slot.index, now - slot.last_seen)
                slot.kill()

    def cancel(self, slot: ChildSlot, running: Running, reason: str, now: float) -> bool:
        """Ask the child to cancel an async job; False for a lane's job, which only a kill stops."""
        if not self.options.is_async_slot(running.job.lane) or slot.control is None:
            return False
        running.cancel_sent = now
        self.tell(slot, CancelJob(running.job.job_id, reason))
        return True

    def tell(self, slot: ChildSlot, message: CancelJob) -> None:
        if slot.control is None:
            return
        try:
            slot.control.send(message.wire())
        except (OSError, ValueError):  # the child is going: its sentinel tells the rest
            pass

    def stop_aborted(self, job_ids: set[str]) -> None:
        """Stop the jobs someone aborted (the lease renewal brought the news): cancel an async one, else kill."""
        now = time.monotonic()
        for slot in self.children.values():
            hit = [r for r in slot.lanes.values() if r.job.job_id in job_ids and not r.aborted]
            for running in hit:
                running.aborted = True
            to_kill = [r for r in hit if not self.cancel(slot, r, ABORT, now)]
            if to_kill and not slot.killed:
                slot.kill(to_kill[0].job.job_id)

    def stop(self) -> None:
        """Ask every child to finish its job and take no other (SIGTERM); none is started again."""
        self.stopping = True
        for slot in self.children.values():
            signal_child(slot, signal.SIGTERM)

    def kill_all(self) -> None:
        """Grace is over: kill every child; its jobs go back recorded interrupted (unstarted ones unrun: ``reap``)."""
        for slot in self.children.values():
            if not slot.killed:
                for running in slot.lanes.values():
                    running.give_back = running.interrupted = True
                slot.kill()

    def kill_now(self) -> None:
        """Leave no child without a supervisor renewing its leases: that would run jobs twice."""
        for slot in self.children.values():
            signal_child(slot, signal.SIGKILL)
