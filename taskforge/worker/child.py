"""The loop in a child process: take a job, run it, record it, tell the supervisor.

A child claims a job only when it is free to run it (no prefetch), so a
high-priority job that arrives is never stuck behind jobs reserved earlier.
It reports every claim to its supervisor, which renews the lease from
outside: a task holding the GIL for an hour cannot starve its own heartbeat.
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass, replace
from multiprocessing.connection import Connection

import redis

from ..broker.queue import PRIORITY_BAND, Claim, new_token
from ..errors import BrokerUnavailable
from .runner import Chain, record, run_claim

log = logging.getLogger("taskforge.worker")


def priority_band(score: float) -> int:
    """0 for the highest priority: lower is better, as in the pending zset."""
    return int(score // PRIORITY_BAND)


IDLE_BLOCK = 1.0  # longest block on the wake list; also the watchdog heartbeat period
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
    def __init__(self, config: ChildConfig, pipe: Connection) -> None:
        from ..loader import load_app

        self.config = config
        self.pipe = pipe
        self.stopping = False
        self.app = load_app(config.app_spec)
        self.broker = self.app.broker
        self.queues = list(config.queues)
        self.next_queue = 0
        self.tokens: dict[str, str] = {}
        self.last_alive = 0.0

    def request_stop(self, *_: object) -> None:
        self.stopping = True

    def alive(self) -> None:
        now = time.monotonic()
        if now - self.last_alive >= IDLE_BLOCK / 2:
            self.pipe.send(("alive",))
            self.last_alive = now

    def dequeue(self, queue: str) -> tuple[list[Claim], float | None]:
        """One dequeue with this queue's current token; a fresh token only once Redis answered."""
        claims, wait = self.broker.dequeue(queue, self.config.lease_ms, token=self.tokens.get(queue))
        self.tokens[queue] = new_token()
        return claims, wait

    def claim(self) -> tuple[list[Claim], float | None]:
        """Claim the best ready job across this child's queues.

        One queue: dequeue it. Several: peek at every queue's head in one
        round trip and claim from the highest priority; queues whose heads
        tie take turns (round-robin), so none starves another of its level.
        """
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
        task = self.app.tasks.get(claim.task)
        if not claim.inherit or task is None:
            return claim
        opts = task.options
        record(self.broker.adopt, claim.queue, claim.id, claim.token, opts.max_attempts, opts.timeout)
        return replace(claim, max_attempts=opts.max_attempts, timeout=opts.timeout, inherit=False)

    def idle(self, wait: float | None) -> None:
        self.alive()
        if wait == 0:
            return
        try:
            self.broker.wait_for_work(self.queues, IDLE_BLOCK if wait is None else min(wait, IDLE_BLOCK))
        except BrokerUnavailable:
            pass

    def run(self) -> int:
        done = 0
        outage = 0.05
        following: tuple[list[Claim], float | None] | None = None
        while not self.stopping:
            try:
                claims, wait = following if following is not None else self.claim()
                following = None
                outage = 0.05
            except (BrokerUnavailable, redis.RedisError, redis.exceptions.RedisClusterException) as exc:
                log.warning("child %d: %s; retrying in %.1f s", self.config.index, exc, outage)
                self.alive()
                time.sleep(outage)
                outage = min(outage * 2, OUTAGE_BACKOFF_CAP)
                continue
            if not claims:
                if self.config.burst and wait != 0:
                    return 0
                self.idle(wait)
                continue
            for claim in claims:
                done += 1
                recycle = bool(self.config.max_jobs and done >= self.config.max_jobs)
                following = self.execute(claim, chain=not recycle)
            if self.config.max_jobs and done >= self.config.max_jobs:
                return EXIT_RECYCLE
        if following is not None:
            self.give_back(following[0])
            # The job whose "start" the supervisor saw last has been recorded:
            # without this it would take our exit for a crash during that job.
            self.pipe.send(("idle",))
        return 0

    def give_back(self, claims: list[Claim]) -> None:
        """Jobs claimed in the very call that recorded the last one, as a shutdown began."""
        for claim in claims:
            record(self.broker.requeue, claim.queue, claim.id, claim.token)

    def execute(self, claim: Claim, chain: bool) -> tuple[list[Claim], float | None] | None:
        """Run one job; with ``chain``, also claim this child's next job in the same call."""
        claim = self.adopt(claim)
        # "start" also tells the supervisor the previous job is over: one message per job.
        self.pipe.send(("start", claim.id, claim.token, claim.queue, claim.task, claim.attempts, claim.timeout))
        def link() -> Chain | None:
            if not chain or self.stopping or len(self.queues) != 1:
                return None
            return Chain(self.config.lease_ms, self.tokens.get(claim.queue) or new_token())

        outcome = run_claim(self.app, claim, link)
        if outcome.next is not None:
            self.tokens[claim.queue] = new_token()
        if log.isEnabledFor(logging.INFO):
            log.info(
                "%s %s attempt %d/%d %s in %.3f s%s",
                claim.task, claim.id, claim.attempts, claim.max_attempts, outcome.state,
                outcome.duration, f": {outcome.error}" if outcome.error else "",
            )
        if outcome.next is None or not outcome.next[0]:
            self.pipe.send(("idle",))
            self.last_alive = time.monotonic()
        return outcome.next


def child_main(config: ChildConfig, pipe: Connection) -> None:
    """Entry point of a spawned child process."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group; the supervisor decides
    die_with_parent(config.supervisor_pid or os.getppid())
    logging.basicConfig(
        level=config.log_level.upper(),
        format=f"%(asctime)s %(levelname)s [child {config.index} pid {os.getpid()}] %(message)s",
        stream=sys.stderr,
    )
    child = Child(config, pipe)
    signal.signal(signal.SIGTERM, child.request_stop)
    code = child.run()
    pipe.close()
    sys.exit(code)
