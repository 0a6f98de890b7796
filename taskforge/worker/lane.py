"""One lane of a worker child: the loop that claims a job, runs it, records it.

A child runs one lane per ``--threads``; each lane has its own claim tokens,
and only one lane per child waits on Redis at a time (``Child.take_waiting``),
so an idle child costs the same few commands whatever its lanes. Kept apart
from ``child.py``, which owns what lanes share: the pipe to the supervisor,
the stop flag, the waiter's place and the job count.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

import redis

from ..broker.queue import PRIORITY_BAND, Claim, new_token
from ..errors import BrokerUnavailable, CorruptQueue
from .batches import RELEASE_AFTER, BatchSize, Done, Outbox, not_recorded
from .joblog import log_outcome
from .messages import JobFinished, JobStarted, LaneIdle, Released
from .outage import OUTAGE_ERRORS
from .runner import Chain, adopted, record, run_claim

if TYPE_CHECKING:
    from .child import Child

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
BURST_RECHECK = 0.05  # burst mode: how soon a lane looks again for a job the loop's claimer gave back
EXIT_RECYCLE = 3  # "replace me": max jobs reached; distinct from 0, "no work left" in burst mode

Claimed = tuple[list[Claim], float | None]
Announced = tuple[tuple[str, str, int, float | None, int, float | None], ...]  # JobStarted.batch


class Lane:
    """One job at a time: claim, run, record, tell the supervisor. A child has one lane per thread."""

    def __init__(self, child: Child, index: int) -> None:
        self.child = child
        self.index = index
        self.config = child.config
        self.context = child.context
        self.claims = child.broker.claims
        self.queues = child.queues
        self.next_queue = 0
        self.tokens: dict[str, str] = {}
        # Woken as the child's waiter with a job: the place is given up (and a sibling told to
        # claim, if the claim saw more ready) once that job has started, so they never delay it.
        self.woke_with_job = self.woke_with_more = False
        self.handed_back_seen = 0  # burst mode: the loop's claimer's give-backs this lane has looked past
        # Batches (``batches.py``): how many jobs to claim next, and the successes recorded with the next claim.
        self.size = BatchSize(self.config.prefetch)
        self.batch_no = 0  # batches run so far: the number the child's board rows carry (``board.py``)
        self.batching = self.config.prefetch != 1
        release_after = RELEASE_AFTER if self.config.prefetch == 0 else None
        self.outbox = Outbox(self.record_done, self.release, release_after, f"taskforge-outbox-{index}")

    @property
    def stopping(self) -> bool:
        return self.child.stopping or self.child.recycling

    def new_token(self) -> str:
        """A claim token carrying this worker's prefix, by which its jobs are found if it is killed."""
        return self.config.owner + new_token()

    def dequeue(self, queue: str) -> tuple[list[Claim], float | None]:
        """One dequeue with this queue's current token; a fresh token only once Redis answered.

        The token is kept before the call, so a call whose reply was lost is
        retried with the same token and gets back the job it claimed.
        """
        token = self.tokens.setdefault(queue, self.new_token())
        claims, wait = self.claims.dequeue(queue, self.config.lease_ms, self.size.next(), token=token)
        self.tokens[queue] = self.new_token()
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
        heads = self.claims.peek(self.queues)
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
        return adopted(self.context, claim, self.child.outage)

    def idle(self, wait: float | None) -> tuple[list[Claim], float | None] | None:
        """Wait for work, as the child's one waiter or behind it; with one queue, the waiter
        also claims what woke it in the same round trip."""
        if wait == 0:
            return None
        if not self.child.take_waiting(self):
            return None
        woken = None
        try:
            elsewhere = self.context.elsewhere
            if wait is None:
                timeout = IDLE_BLOCK
            else:  # just after passing a job on (``foreign.py``), a head start to the worker it was left for
                timeout = min(wait, IDLE_BLOCK) if elsewhere is None else elsewhere.timeout(wait, IDLE_BLOCK)
            woken = self.wait_for_work(timeout)
            return woken
        finally:
            if woken is not None and woken[0]:
                self.woke_with_job = True  # execute() hands on, right after the job starts
                self.woke_with_more = woken[1] is not None  # the claim saw more ready (``ClaimBatch``)
            else:
                self.child.leave_waiting()

    def hand_on_after_start(self) -> None:
        """Give up the waiter's place, and wake a sibling if more is ready, now that the job this lane
        woke with started. Done before, the siblings woken would take the GIL from the job as it starts
        (half a millisecond of W3 latency with eight lanes); an empty claim of a sibling would too."""
        if self.woke_with_job:
            self.woke_with_job = False
            self.child.leave_waiting()
            if self.woke_with_more:
                self.child.hand_on()

    def wait_for_work(self, timeout: float) -> tuple[list[Claim], float | None] | None:
        self.child.alive()
        if not self.queues:  # every queue quarantined: nothing to wait on but a signal
            time.sleep(timeout)
            return None
        try:
            if len(self.queues) == 1 and self.claims.pipelined_wait:
                queue = self.queues[0]
                token = self.tokens.setdefault(queue, self.new_token())
                woken = self.claims.wait_and_dequeue(queue, timeout, self.config.lease_ms, token)
                self.tokens[queue] = self.new_token()
                self.child.outage.answered()
                return woken
            self.claims.wait_for_work(self.queues, timeout)
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
                    if self.burst_over():
                        self.outbox.close()
                        return 0
                    continue
                following = self.idle(wait)
                continue
            following = self.work(claims, chained)
        self.outbox.close()
        if following is not None:
            self.give_back(following[0])
            # The job whose start the supervisor saw last has been recorded:
            # without this it would take our exit for a crash during that job.
            self.child.send(LaneIdle(self.index))
        return EXIT_RECYCLE if self.child.recycling else 0

    def work(self, claims: list[Claim], chained: bool) -> Claimed | None:
        """Run what a claim returned: a batch, or (``--prefetch 1``) each job with the next one's claim."""
        if not chained:
            self.child.hand_on()
        if self.batching:
            return self.run_batch(claims)
        following = None
        for claim in claims:
            following = self.dispatch(claim)
        return following

    def run_batch(self, claims: list[Claim]) -> Claimed | None:
        """Run the jobs of one claim in turn, then record their successes with the next claim.

        The first job's start tells the supervisor of the others (renewed with
        it, given back unrun if the child dies); a stop or a recycle gives
        back those not started yet, without using their attempts.
        """
        asked = self.size.next()
        began = time.monotonic()
        aio = self.child.aio
        claims = [c if aio is not None and aio.is_async(c) else self.adopt(c) for c in claims]
        mine = [c for c in claims if aio is None or not aio.is_async(c)]  # the loop's jobs: it reports them
        rest = tuple(
            (c.id, c.task, c.attempts, c.timeout, c.max_attempts, self.child.soft_timeout(c.task)) for c in mine[1:]
        )
        self.batch_no += 1
        self.outbox.start_batch(claims)
        ran = place = 0
        while (claim := self.outbox.next_claim()) is not None:
            if ran and self.stopping:
                self.give_back([claim, *self.outbox.unstarted()])
                break
            self.outbox.starting(claim)
            if aio is not None and aio.is_async(claim):
                self.dispatch(claim)  # its start is said as the loop may start it now
            else:
                self.child.count_job()  # the last one allowed sets recycling: the rest go back above
                self.execute(claim, chain=False, batch=rest if place == 0 else (), defer=True, place=place)
                self.outbox.ended(claim)
                place += 1
            ran += 1
        self.size.observe(asked, ran if ran < len(claims) else len(claims), time.monotonic() - began)
        following = self.settle_and_claim()
        if following is None or not following[0]:
            self.child.send(LaneIdle(self.index))
            self.child.last_alive = time.monotonic()
        return following

    def release(self, claims: list[Claim]) -> None:
        """Give back the batch's jobs not started, held behind a run that turned out long (the outbox's
        thread): another lane or worker runs them now. The supervisor is told it no longer holds them."""
        self.give_back(claims)
        self.child.send(Released(self.index, tuple(c.id for c in claims)))

    def settle_and_claim(self) -> Claimed | None:
        """Record the batch's successes and, with one queue, claim the next batch in the same call."""
        items, marks = self.outbox.take()
        if not items or len(self.queues) != 1 or self.stopping:
            self.outbox.record(items, marks)
            return None
        queue = self.queues[0]
        token = self.tokens.setdefault(queue, self.new_token())
        triples = [(d.claim.id, d.claim.token, d.result) for d in items]
        started = [(c.id, c.token) for c in marks]
        lease = self.config.lease_ms
        answer: tuple[list[bool], Claimed | None] | None = record(
            self.claims.settle, queue, triples, lease, token, self.size.next(), started, outage=self.child.outage
        )
        if answer is None:
            return None  # given up: the leases expire and the jobs run again
        oks, following = answer
        self.tokens[queue] = self.new_token()
        not_recorded(self.claims, items, oks)
        return following

    def record_done(self, queue: str, items: list[Done], marks: list[Claim]) -> None:
        """Record successes, and say which jobs of the batch started, with no claim (the outbox's
        thread, before a job starts after a long run, or before the lane waits or exits)."""
        if not items and not marks:
            return
        triples = [(d.claim.id, d.claim.token, d.result) for d in items]
        started = [(c.id, c.token) for c in marks]
        answer = record(self.claims.settle, queue, triples, 0, "", 1, started, outage=self.child.outage)
        if answer is not None:
            not_recorded(self.claims, items, answer[0])

    def burst_over(self) -> bool:
        """Burst mode found no job: True to end, False when work may yet appear here."""
        if self.child.reports_pending():
            return False  # a workflow step's report may yet send work: not done until it is out
        aio = self.child.aio
        if aio is not None and self.index >= 0 and aio.may_hold(self.handed_back_seen):
            self.handed_back_seen = aio.handed_back
            time.sleep(BURST_RECHECK)  # the job the loop's claimer held may be back: look again
            return False
        return True

    def give_back(self, claims: list[Claim]) -> None:
        """Jobs claimed in the very call that recorded the last one, as a shutdown began."""
        for claim in claims:
            record(self.claims.requeue, claim.queue, claim.id, claim.token, outage=self.child.outage)

    def dispatch(self, claim: Claim) -> Claimed | None:
        """Run a claimed job in this lane, or hand it to the child's event loop if its task is async."""
        aio = self.child.aio
        if aio is not None and aio.is_async(claim):
            aio.take(self, claim)
            return None
        last = self.child.count_job()
        return self.execute(claim, chain=not last)

    def execute(
        self, claim: Claim, chain: bool, batch: Announced = (), defer: bool = False, place: int = 0
    ) -> tuple[list[Claim], float | None] | None:
        """Run one job; with ``chain``, also claim this child's next job in the same call; with
        ``defer``, leave its success to the lane's outbox (a batch: ``run_batch``, where ``place``
        is the job's place among the lane's jobs of the batch)."""
        try:
            claim = self.adopt(claim)
            board = self.child.board
            if place and board is not None and not self.config.report_outcomes:
                board.write(self.index, self.batch_no, place)  # announced with the batch: no message
            else:
                # JobStarted also tells the supervisor the previous job is over.
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
                        self.child.soft_timeout(claim.task),
                        batch,
                        self.batch_no,
                    )
                )
        finally:
            self.hand_on_after_start()
            if self.child.aio is not None:
                self.child.aio.lane_started()  # the loop's claimer, waiting for a lane to take a job, goes on

        def link() -> Chain | None:
            if not chain or self.stopping or len(self.queues) != 1:
                return None
            return Chain(self.config.lease_ms, self.tokens.get(claim.queue) or self.new_token())

        outcome = run_claim(self.context, claim, link, self.child.outage, defer=self.outbox.add if defer else None)
        if self.config.report_outcomes:
            self.child.send(JobFinished(self.index, outcome.state, outcome.duration))
        if outcome.next is not None:
            self.tokens[claim.queue] = self.new_token()

        log_outcome(claim, outcome)
        if defer:
            return None  # the batch's end tells the supervisor the lane is idle (``run_batch``)
        if outcome.next is None or not outcome.next[0]:
            self.child.send(LaneIdle(self.index))
            self.child.last_alive = time.monotonic()
        return outcome.next
