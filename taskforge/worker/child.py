"""The loop in a child process: take a job, run it, record it, tell the supervisor.

A child claims a job only when it is free to run it (no prefetch), so a
high-priority job that arrives is never stuck behind jobs reserved earlier.
It reports every claim to its supervisor, which renews the lease from
outside: a task holding the GIL for an hour cannot starve its own heartbeat.

With ``--threads N`` a child runs N lanes, each a thread with this same loop
and its own claim tokens: while one lane waits on Redis or on the network,
the others run, which is what I/O-bound tasks need. Every message to the
supervisor names its lane.
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

import redis

from ..broker.queue import PRIORITY_BAND, Claim, new_token
from ..errors import BrokerUnavailable, CorruptQueue
from ..logs import configure_logging
from .joblog import outcome_line
from .messages import Heartbeat, JobFinished, JobStarted, LaneIdle, Message, Recycling
from .outage import OUTAGE_ERRORS, Outage
from .runner import AppContext, Chain, record, run_claim

log = logging.getLogger("taskforge.worker")


def priority_band(score: float) -> int:
    """0 for the highest priority: lower is better, as in the pending zset."""
    return int(score // PRIORITY_BAND)


# Longest block on the wake list: one waiter per child blocks this long when
# nothing is scheduled, so an idle child costs 2 commands per IDLE_BLOCK. It
# stays under the client's socket timeout (10 s), and a stopping supervisor
# wakes its idle children at once (see ``Supervisor.wake_children``).
IDLE_BLOCK = 5.0
LANE_WAIT = 0.5  # a lane waiting on its child's waiter looks at the stop flag this often (no Redis)
OUTAGE_BACKOFF_CAP = 5.0
PR_SET_PDEATHSIG = 1
EXIT_RECYCLE = 3  # "replace me": max jobs reached; distinct from 0, "no work left" in burst mode


@dataclass(frozen=True)
class ChildConfig:
    """Everything a freshly spawned child needs; picklable."""

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


class Child:
    """What a child's lanes share: the run context, its broker, the pipe, the stop flag and the job count."""

    def __init__(self, config: ChildConfig, pipe: Connection) -> None:
        from ..loader import load_app

        self.config = config
        self.pipe = pipe
        self.stopping = False
        self.recycling = False  # max_jobs reached: lanes finish their job and stop claiming
        # The app is read once: the lanes need only what running a job needs.
        self.context = AppContext.of(load_app(config.app_spec))
        self.broker = self.context.broker
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

    def request_stop(self, *_: object) -> None:
        self.stopping = True

    def send(self, message: Message) -> None:
        with self.lock:
            self.pipe.send(message)

    def alive(self) -> None:
        now = time.monotonic()
        if now - self.last_alive >= IDLE_BLOCK / 2:
            self.last_alive = now
            self.send(Heartbeat())

    def hand_on(self) -> None:
        """A lane found work: there may be more, so one lane waiting locally tries a claim too.

        Lanes join one by one, each only once it is free (no prefetch): the
        one woken claims, and hands on again only if it found a job.
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

    def count_job(self) -> bool:
        """Count one job taken; True when it is the last this child may take."""
        with self.lock:
            self.done += 1
            last = bool(self.config.max_jobs and self.done == self.config.max_jobs)
            if last:
                self.recycling = True
            recycling = self.recycling
        if last:
            # Said, not only shown by the exit code: a task may exit with any code.
            self.send(Recycling())
        return recycling

    def run(self) -> int:
        lanes = [Lane(self, index) for index in range(max(1, self.config.threads))]
        if len(lanes) == 1:
            return lanes[0].run()
        codes: list[int] = []

        def run_lane(lane: Lane) -> None:
            try:
                codes.append(lane.run())
            except BaseException:
                # As a single-lane child would: the same report multiprocessing
                # prints for an uncaught error, then death, and the supervisor
                # settles every job this child held and starts a new one.
                sys.stderr.write(f"Process {multiprocessing.current_process().name}:\n")
                traceback.print_exc()
                sys.stderr.flush()
                os._exit(1)

        threads = [
            threading.Thread(target=run_lane, args=(lane,), name=f"taskforge-lane-{lane.index}") for lane in lanes
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            while thread.is_alive():  # a timed join keeps the main thread free for SIGTERM
                thread.join(timeout=0.5)
        return EXIT_RECYCLE if EXIT_RECYCLE in codes else 0


class Lane:
    """One job at a time: claim, run, record, tell the supervisor. A child has one lane per thread."""

    def __init__(self, child: Child, index: int) -> None:
        self.child = child
        self.index = index
        self.config = child.config
        self.context = child.context
        self.broker = child.broker
        self.queues = child.queues
        self.next_queue = 0
        self.tokens: dict[str, str] = {}

    @property
    def stopping(self) -> bool:
        return self.child.stopping or self.child.recycling

    def dequeue(self, queue: str) -> tuple[list[Claim], float | None]:
        """One dequeue with this queue's current token; a fresh token only once Redis answered.

        The token is kept before the call, so a call whose reply was lost is
        retried with the same token and gets back the job it claimed.
        """
        token = self.tokens.setdefault(queue, new_token())
        claims, wait = self.broker.dequeue(queue, self.config.lease_ms, token=token)
        self.tokens[queue] = new_token()
        return claims, wait

    def claim(self) -> tuple[list[Claim], float | None]:
        """Claim the best ready job across this child's queues.

        One queue: dequeue it. Several: peek at every queue's head in one
        round trip and claim from the highest priority; queues whose heads
        tie take turns (round-robin), so none starves another of its level.
        """
        if not self.queues:
            return [], None
        if len(self.queues) == 1:
            return self.dequeue(self.queues[0])
        heads = self.broker.peek(self.queues)
        ready = [(score, i) for i, (score, _) in enumerate(heads) if score is not None]
        waits = [wait for _, wait in heads if wait is not None]
        soonest = min(waits) if waits else None
        if not ready:
            return [], soonest
        best = min(priority_band(score) for score, _ in ready)
        n = len(self.queues)
        tied = sorted((i - self.next_queue) % n for score, i in ready if priority_band(score) == best)
        index = (self.next_queue + tied[0]) % n
        self.next_queue = (index + 1) % n
        claims, wait = self.dequeue(self.queues[index])
        return claims, (0.0 if not claims else wait)

    def adopt(self, claim: Claim) -> Claim:
        """A job sent by name takes max_attempts and timeout from this worker's task."""
        task = self.context.tasks.get(claim.task)
        if not claim.inherit or task is None:
            return claim
        opts = task.options
        args = (claim.queue, claim.id, claim.token, opts.max_attempts, opts.timeout)
        record(self.broker.adopt, *args, outage=self.child.outage)
        return replace(claim, max_attempts=opts.max_attempts, timeout=opts.timeout, inherit=False)

    def idle(self, wait: float | None) -> tuple[list[Claim], float | None] | None:
        """Wait for work, as the child's one waiter or behind it; with one queue, the waiter
        also claims what woke it in the same round trip."""
        if wait == 0:
            return None
        if not self.child.take_waiting(self):
            return None
        try:
            return self.wait_for_work(IDLE_BLOCK if wait is None else min(wait, IDLE_BLOCK))
        finally:
            self.child.leave_waiting()

    def wait_for_work(self, timeout: float) -> tuple[list[Claim], float | None] | None:
        self.child.alive()
        if not self.queues:  # every queue quarantined: nothing to wait on but a signal
            time.sleep(timeout)
            return None
        try:
            if len(self.queues) == 1 and self.broker.pipelined_wait:
                queue = self.queues[0]
                token = self.tokens.setdefault(queue, new_token())
                woken = self.broker.wait_and_dequeue(queue, timeout, self.config.lease_ms, token)
                self.tokens[queue] = new_token()
                self.child.outage.answered()
                return woken
            self.broker.wait_for_work(self.queues, timeout)
            self.child.outage.answered()
        except OUTAGE_ERRORS as exc:
            self.child.outage.failed(exc)  # the next claim meets the outage again, and backs off
        except CorruptQueue as exc:
            self.quarantine(exc)
        except redis.RedisError as exc:  # never spin on an error we cannot name
            log.warning("child %d: waiting for work failed: %s", self.config.index, exc)
            time.sleep(timeout)
        return None

    def quarantine(self, exc: CorruptQueue) -> None:
        """Stop claiming from the damaged queues (said once, clearly) and keep serving the others.

        A damaged queue cannot be served safely: its scripts refuse to run
        before writing anything. Looping on it would only fill the log.
        """
        damaged = [q for q in self.queues if q in exc.queues] or list(self.queues)
        self.queues = [q for q in self.queues if q not in damaged]
        self.next_queue = 0
        rest = f"serving {', '.join(self.queues)}" if self.queues else "no queue left to serve"
        log.error(
            "child %d: %s; stops claiming from %s until the worker restarts (%s)",
            self.config.index,
            exc,
            ", ".join(damaged),
            rest,
        )

    def run(self) -> int:
        outage = 0.05
        following: tuple[list[Claim], float | None] | None = None
        while not self.stopping:
            chained = following is not None
            try:
                if following is None:
                    claims, wait = self.claim()
                    self.child.outage.answered()
                else:
                    claims, wait = following
                following = None
                outage = 0.05
            except CorruptQueue as exc:
                self.quarantine(exc)
                claims, wait = [], (0.0 if self.queues else None)
            except (BrokerUnavailable, redis.RedisError, redis.exceptions.RedisClusterException) as exc:
                if isinstance(exc, OUTAGE_ERRORS):
                    self.child.outage.failed(exc)
                else:
                    log.warning("child %d: %s; retrying in %.1f s", self.config.index, exc, outage)
                self.child.alive()
                time.sleep(outage)
                outage = min(outage * 2, OUTAGE_BACKOFF_CAP)
                continue
            if not claims:
                if self.config.burst and wait != 0:
                    return 0
                following = self.idle(wait)
                if following is not None and following[0]:
                    self.child.hand_on()
                continue
            if not chained:
                self.child.hand_on()
            for claim in claims:
                last = self.child.count_job()
                following = self.execute(claim, chain=not last)
        if following is not None:
            self.give_back(following[0])
            # The job whose start the supervisor saw last has been recorded:
            # without this it would take our exit for a crash during that job.
            self.child.send(LaneIdle(self.index))
        return EXIT_RECYCLE if self.child.recycling else 0

    def give_back(self, claims: list[Claim]) -> None:
        """Jobs claimed in the very call that recorded the last one, as a shutdown began."""
        for claim in claims:
            record(self.broker.requeue, claim.queue, claim.id, claim.token, outage=self.child.outage)

    def execute(self, claim: Claim, chain: bool) -> tuple[list[Claim], float | None] | None:
        """Run one job; with ``chain``, also claim this child's next job in the same call."""
        claim = self.adopt(claim)
        # JobStarted also tells the supervisor the previous job is over: one message per job.
        self.child.send(
            JobStarted(
                self.index,
                claim.id,
                claim.token,
                claim.queue,
                claim.task,
                claim.attempts,
                claim.timeout,
                claim.max_attempts,
            )
        )

        def link() -> Chain | None:
            if not chain or self.stopping or len(self.queues) != 1:
                return None
            return Chain(self.config.lease_ms, self.tokens.get(claim.queue) or new_token())

        outcome = run_claim(self.context, claim, link, self.child.outage)
        if self.config.report_outcomes:
            self.child.send(JobFinished(self.index, outcome.state, outcome.duration))
        if outcome.next is not None:
            self.tokens[claim.queue] = new_token()
        if outcome.state != "succeeded" or log.isEnabledFor(logging.INFO):  # no line built for nobody
            attempt = f"{claim.attempts}/{claim.max_attempts}"
            level, text = outcome_line(
                claim.task, claim.id, attempt, outcome.state, outcome.duration, outcome.error, outcome.retry_in
            )
            log.log(level, "%s", text)
        if outcome.next is None or not outcome.next[0]:
            self.child.send(LaneIdle(self.index))
            self.child.last_alive = time.monotonic()
        return outcome.next


def child_main(config: ChildConfig, pipe: Connection) -> None:
    """Entry point of a spawned child process."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group; the supervisor decides
    die_with_parent(config.supervisor_pid or os.getppid())
    configure_logging(config.log_level, f"child {config.index} pid {os.getpid()}")
    child = Child(config, pipe)
    signal.signal(signal.SIGTERM, child.request_stop)
    code = child.run()
    child.broker.flush_outcomes()  # successes are counted by the broker and written in batches
    pipe.close()
    sys.exit(code)
