"""A worker child process: its lanes (``lane.py``) take jobs, run them, record them, tell the supervisor.

A lane claims only once it is free to run what it claims. With the default
``--prefetch auto`` that is one job while the queue is shallow or runs are
long, and up to 16 at once while the queue is deep and a batch's runs fit in
about 5 ms (``batches.py``), so a high-priority job that arrives waits at
most about that long behind jobs claimed earlier; the jobs of a batch not
started yet go back to their queue once one of its runs outlasts 0.1 s.
``--prefetch 1`` claims one job at a time; ``--prefetch N``, N at once.
It reports every claim to its supervisor, which renews the lease from
outside: a task holding the GIL for an hour cannot starve its own heartbeat.

With ``--threads N`` a child runs N lanes, each a thread with the loop of
``lane.py`` and its own claim tokens: while one lane waits on Redis or on the network,
the others run, which is what I/O-bound tasks need. Every message to the
supervisor names its lane.

When the app has ``async def`` tasks, a child also runs an event loop in a
thread of its own, with ``--async N`` slots and a claimer of its own
(``aio_loop.py``, ``aio_feed.py``); an app without any starts none of it.
"""

from __future__ import annotations

import ctypes
import logging
import multiprocessing
import os
import signal
import sys
import threading
import time
import traceback
from dataclasses import dataclass, replace
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any

from ..broker.stats import FLUSH_EVERY_S
from ..context import set_worker
from ..logs import configure_logging
from ..workflow_seam import NAME
from . import soft
from .aio_feed import AsyncFeeder
from .aio_loop import AsyncSide, is_async_task
from .aio_run import SOFT
from .board import Board
from .courier import Courier, CourierCarrier
from .foreign import Elsewhere
from .hangup import ignore_hup
from .lane import EXIT_RECYCLE, IDLE_BLOCK, LANE_WAIT, Lane
from .memory import watch_memory
from .messages import CancelJob, Heartbeat, Message, Recycling, from_wire
from .outage import Outage
from .runner import AppContext

if TYPE_CHECKING:
    from ..broker.stats import Tally

log = logging.getLogger("taskforge.worker")
PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class ChildConfig:
    """Everything a new child needs (spawned or forked, ``starter.py``); picklable."""

    app_spec: str
    queues: tuple[str, ...]
    lease_ms: int
    burst: bool
    max_jobs: int
    log_level: str
    index: int
    supervisor_pid: int = 0  # whom to die with: the supervisor's word, not our own getppid()
    report_outcomes: bool = False  # tell the supervisor how each run ended (for its metrics)
    threads: int = 1  # lanes: jobs this child runs at once, one per thread
    async_slots: int = 100  # async jobs at once on the child's event loop (if the app has async tasks)
    owner: str = ""  # prefix of this worker's claim tokens: finds its jobs if it is killed (``rescue.py``)
    prefetch: int = 0  # jobs a lane claims at once: --prefetch N, or 0 for auto (``batches.py``)
    max_memory_mb: int = 0  # --max-memory-per-child: replaced once past this resident size (``memory.py``)
    worker_id: str = ""  # the worker's id as its registry entry gives it: ``current_job().worker_id``


def die_with_parent(parent: int) -> None:
    """Make sure a child never outlives its supervisor (no orphans after a SIGKILL).

    Linux kills us when the parent dies; elsewhere a thread notices the
    parent change and exits.
    """
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:  # died before prctl took effect
        os._exit(1)

    def watch() -> None:
        while True:
            time.sleep(1.0)
            if os.getppid() != parent:
                os._exit(1)

    threading.Thread(target=watch, name="taskforge-parent-watch", daemon=True).start()


def keep_counts_written(tally: Tally, stop: threading.Event) -> threading.Thread:
    """Write the success counts and run times ``tally`` holds about once a second, until ``stop`` is set.

    A lane writes them itself when they are due; this thread writes the rest,
    so a lane going idle need not spend a round trip on them, and a lane that
    goes straight on to a job of an hour does not hold its counts for that
    hour. It belongs to the child process, and dies with it.
    """

    def write() -> None:
        while not stop.wait(FLUSH_EVERY_S / 2):
            if tally.due():
                tally.flush_outcomes()

    tally.flush_on_idle = False  # this thread writes them: a lane going idle need not
    thread = threading.Thread(target=write, name="taskforge-counts", daemon=True)
    thread.start()
    return thread


class Child:
    """What a child's lanes share: the run context, its broker, the pipe, the stop flag and the job count."""

    def __init__(
        self, config: ChildConfig, pipe: Connection, control: Connection | None = None, board: Board | None = None
    ) -> None:
        from ..loader import import_included, load_app

        self.config = config
        self.pipe = pipe
        self.control = control
        self.board = board
        self.stopping = False
        self.recycling = False  # max_jobs reached: lanes finish their job and stop claiming
        # The app is read once: the lanes need only what running a job needs.
        app = load_app(config.app_spec)
        import_included(app)  # as the supervisor did: a module it imported is importable here too
        context = AppContext.of(app)
        # Workflow steps' reports go out from a thread of their own, in batches (``courier.py``).
        self.courier = Courier(context.broker)
        finals = app.finals.replaced(NAME, self.courier.workflows.listener(CourierCarrier(self.courier)))
        self.context = replace(
            context, finals=finals, elsewhere=Elsewhere(context.broker.claims, context.broker.client)
        )
        self.broker = self.context.broker
        self.counts_written = threading.Event()  # set at exit: the thread stops, the last flush follows
        self.outage = Outage(self.broker.url)  # one per process: the lanes share what they say about Redis
        self.queues = list(config.queues)
        self.last_alive = 0.0
        self.done = 0
        self.lock = threading.Lock()  # the pipe and the job count, shared by the lanes
        # One lane at a time waits on Redis for the whole child; the others wait
        # here, for its word that work arrived (``hand_on``) or for its place.
        self.idle = threading.Condition(threading.Lock())
        self.waiter: Lane | None = None
        self.wakeups = 0
        self.resting = 0  # lanes waiting on the condition
        self.aio: AsyncSide | None = None
        self.lanes_running = 0  # thread lanes whose loop has not ended (the loop's claimer not counted)
        if config.async_slots > 0 and any(map(is_async_task, self.context.tasks.values())):
            # Slot ids follow the lanes' indexes: the supervisor tells them apart by number.
            self.aio = AsyncSide(self, config.async_slots, max(1, config.threads))

    def soft_timeout(self, task: str) -> float | None:
        """The soft timeout of this worker's definition of ``task`` (the supervisor enforces it)."""
        definition = self.context.tasks.get(task)
        return None if definition is None else definition.options.soft_timeout

    def listen(self) -> None:
        """The supervisor's requests (``CancelJob``): for the event loop's jobs, or a lane's soft timeout."""
        assert self.control is not None
        while True:
            try:
                message = from_wire(self.control.recv())
            except (EOFError, OSError):
                return
            if not isinstance(message, CancelJob):
                continue
            if self.aio is not None and self.aio.on_control(message):
                continue
            if message.reason == SOFT and soft.interrupt(message.job_id):
                log.info("job %s: SoftTimeout raised in its lane (past its soft timeout)", message.job_id)

    def request_stop(self, *_: object) -> None:
        self.stopping = True

    def send(self, message: Message) -> None:
        try:
            with self.lock:
                self.pipe.send(message.wire())
        except BrokenPipeError:
            # The supervisor is gone (killed): the kernel's parent-death signal is on its way.
            # Go now, quietly, as that signal would: the leases bring back what this child held.
            os._exit(1)

    def alive(self) -> None:
        now = time.monotonic()
        if now - self.last_alive >= IDLE_BLOCK / 2:
            self.last_alive = now
            self.send(Heartbeat())

    def hand_on(self) -> None:
        """A lane found work: there may be more, so one lane waiting locally tries a claim too.

        Lanes join one by one, each only once it is free (a busy lane never
        claims ahead): the one woken claims, and hands on again only if it
        found a job.
        """
        with self.idle:
            if self.resting:
                self.wakeups = 1
                self.idle.notify()

    def take_waiting(self, lane: Lane) -> bool:
        """Become this child's one waiter on Redis; False when woken to claim instead, or stopping.

        A lane that is not the waiter blocks on a local condition, so an idle
        child makes the same few Redis calls whatever its ``--threads``.
        """
        with self.idle:
            self.resting += 1
            try:
                while not lane.stopping:
                    if self.wakeups:
                        self.wakeups -= 1
                        return False
                    if self.waiter is None:
                        self.waiter = lane
                        return True
                    self.idle.wait(LANE_WAIT)
                return False
            finally:
                self.resting -= 1

    def leave_waiting(self) -> None:
        with self.idle:
            self.waiter = None
            self.idle.notify()  # a lane waiting locally takes the place, if this one goes to run a job

    def reports_pending(self) -> bool:
        """Wait for the workflow reports posted so far to go out; True if there were any."""
        if self.courier.idle():
            return False
        self.courier.flush()
        return True

    def lanes_left(self) -> bool:
        with self.lock:
            return self.lanes_running > 0

    def count_job(self) -> bool:
        """Count one job taken; True when it is the last this child may take."""
        with self.lock:
            self.done += 1
            last = bool(self.config.max_jobs and self.done == self.config.max_jobs)
        if last:
            self.recycle()
        return self.recycling

    def recycle(self) -> None:
        """Take no more jobs, end those running, exit to be replaced (max jobs or memory reached)."""
        with self.lock:
            said, self.recycling = self.recycling, True
        if not said:
            # Said, not only shown by the exit code: a task may exit with any code.
            self.send(Recycling())

    def run(self) -> int:
        keep_counts_written(self.broker.claims.tally, self.counts_written)
        if self.config.max_memory_mb:
            watch_memory(self.config.max_memory_mb, self.config.index, self.recycle, self.counts_written)
        if self.control is not None:
            threading.Thread(target=self.listen, name="taskforge-control", daemon=True).start()
        lanes = [Lane(self, index) for index in range(max(1, self.config.threads))]
        self.lanes_running = len(lanes)
        if self.aio is not None:
            self.aio.start()
            lanes.append(AsyncFeeder(self, self.aio))
        if len(lanes) == 1:
            return lanes[0].run()
        codes: list[int] = []

        def run_lane(lane: Lane) -> None:
            try:
                codes.append(lane.run())
                if lane.index >= 0:
                    with self.lock:
                        self.lanes_running -= 1
            except BaseException:
                # As a single-lane child would: the same report multiprocessing
                # prints for an uncaught error, then death, and the supervisor
                # settles every job this child held and starts a new one.
                sys.stderr.write(f"Process {multiprocessing.current_process().name}:\n")
                traceback.print_exc()
                sys.stderr.flush()
                os._exit(1)

        # The first lane runs in the main thread: a soft timeout's signal interrupts a
        # blocking call there (soft.py); a signal handler runs in the main thread only.
        threads = [
            threading.Thread(target=run_lane, args=(lane,), name=f"taskforge-lane-{lane.index}") for lane in lanes[1:]
        ]
        for thread in threads:
            thread.start()
        run_lane(lanes[0])
        for thread in threads:
            while thread.is_alive():  # a timed join keeps the main thread free for SIGTERM
                thread.join(timeout=0.5)
        if self.aio is not None:
            self.aio.finish()  # the claimers stopped; the loop's jobs end (or the supervisor kills us)
        return EXIT_RECYCLE if EXIT_RECYCLE in codes else 0


def child_main(config: ChildConfig, pipe: Connection, control: Connection | None = None, board: Any = None) -> None:
    """Entry point of a child process, spawned or forked; ``control`` carries the supervisor's ``CancelJob``,
    ``board`` is the shared array where lanes say which job of a batch they run (``board.py``)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group; the supervisor decides
    ignore_hup()  # so does a closing terminal's SIGHUP: a warm restart, the supervisor's to run
    die_with_parent(config.supervisor_pid or os.getppid())
    configure_logging(config.log_level, f"child {config.index} pid {os.getpid()}")
    set_worker(config.worker_id)
    child = Child(config, pipe, control, None if board is None else Board(board))
    signal.signal(signal.SIGTERM, child.request_stop)
    # A forked child starts with these held back (``forkserver.py``): one sent meanwhile arrives now.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT})
    soft.install()
    code = child.run()
    child.courier.flush()  # what is left after that, the reconciler delivers
    child.counts_written.set()
    child.broker.claims.tally.flush_outcomes()  # successes are counted by the broker and written in batches
    pipe.close()
    sys.exit(code)
