"""A lane's batches: how many jobs it claims at once, and the successes it records together.

The promises are in docs/worker-model.md, "Process model". A lane claims up to N ready jobs
of one queue in one call and records their successes together with its
next claim (``settle.lua``): one round trip and one script per batch
instead of one per job. ``--prefetch 1`` keeps the one-job path (each
success recorded with the next job's claim, ``succeed.lua``).

``BatchSize`` picks N: fixed by ``--prefetch N``, or, by default, adapted
to the queue and the runs: one job while the queue is shallow (a claim got
fewer than it asked for) or runs are long, doubling up to ``AUTO_MAX``
while the queue is deep and a batch's runs fit in ``BATCH_BUDGET``, so a
job of a higher priority arriving meanwhile waits at most that long for the
lane's next claim, which takes it first.

``Outbox`` holds the successes not yet recorded and the batch's jobs not
started yet. A lane sends the successes with its next claim; those left
waiting past ``FLUSH_AFTER`` (a longer run started after them) are sent by
the outbox's own thread, so every outcome is recorded at most about 5 ms
after its run ended. A run longer than ``FLUSH_AFTER`` is recorded before
the batch's next job starts (``starting``): its success would otherwise be
written only once that next job had run ``FLUSH_AFTER`` too, and a job
chained to it by the caller (one that reads it, or waits on its
``result()``) could start while it still shows ``running``. A round trip
per such run costs little beside a run that long.

The outbox also says which jobs of the batch started. A claim of several
jobs charges each its attempt, and marks every one after the first
``unstarted``: a reclaim refunds the attempt of such a job, so a worker
killed whole (no supervisor left to give them back) does not charge the
jobs it never started. A job's start mark goes with the next send, at most
``FLUSH_AFTER`` after the start; a job whose run ends sooner needs none (its
outcome is recorded, or waits here and goes first). So a job that takes its
whole worker down within ``FLUSH_AFTER`` of its start, or a run whose
success was still waiting here then, comes back as the same attempt; the
first job of every claim is charged outright, so such a job cannot loop
unseen: each pass charges the job that heads the batch.
With ``auto``, that thread also gives back the jobs
not started yet once a run of the batch outlasts ``RELEASE_AFTER``: a run
that turns out long must not hold jobs that another lane or worker could
run now (or that the long run itself waits for).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

from ..broker.queue import Claim
from .lost_acks import record_gone, recorded_success

if TYPE_CHECKING:
    from ..broker.roles import ClaimsRole

log = logging.getLogger("taskforge.worker")

AUTO_MAX = 16  # the most a lane claims at once by default
BATCH_BUDGET = 0.005  # by default, a batch's runs (their recent average) fit in this many seconds
FLUSH_AFTER = 0.004  # a waiting success older than this is sent on its own (the promise: 5 ms)
RUN_WEIGHT = 0.2  # the weight of the newest batch in the average run time
CLOSE_WAIT = 30.0  # at most this long a closing lane waits for its outbox's thread to finish sending
RELEASE_AFTER = 0.1  # auto: a run of a batch this long gives the batch's jobs not started yet back


class BatchSize:
    """How many jobs a lane claims next: ``--prefetch N`` (``prefetch``), or adapted when 0 (auto)."""

    def __init__(self, prefetch: int) -> None:
        self.fixed = prefetch
        self.size = prefetch or 1
        self.run_avg: float | None = None

    def next(self) -> int:
        return self.size

    def observe(self, asked: int, got: int, ran: float) -> None:
        """A batch of ``got`` jobs (of ``asked``) ran in ``ran`` seconds in all: the next size."""
        if self.fixed or got == 0:
            return
        per_job = ran / got
        self.run_avg = per_job if self.run_avg is None else self.run_avg + RUN_WEIGHT * (per_job - self.run_avg)
        if got < asked:  # the queue held no more: take what there is, and grow again once it is deep
            self.size = got
            return
        fits = int(BATCH_BUDGET / self.run_avg) if self.run_avg > 0 else AUTO_MAX
        self.size = max(1, min(AUTO_MAX, self.size * 2, fits))


class Done(NamedTuple):
    """A success waiting to be recorded."""

    claim: Claim
    result: bytes
    ended: float  # time.monotonic() when its run ended


Started = tuple[Claim, float]  # a job of the batch that started (time.monotonic()), its start not said yet
# Records the successes of one queue and says which of its jobs started (the lane's ``record_done``).
Send = Callable[[str, list[Done], list[Claim]], None]
Release = Callable[[list[Claim]], None]  # gives back jobs of a batch not started (the lane's ``release``)


class Outbox:
    """A lane's recorded-later successes and unstarted batch jobs, and the thread that watches both."""

    def __init__(self, send: Send, release: Release, release_after: float | None, name: str) -> None:
        self.send = send
        self.release = release
        self.release_after = release_after
        self.name = name
        self.changed = threading.Condition()
        self.items: list[Done] = []
        self.pending: list[Claim] = []  # the batch's jobs not started yet, in order
        self.run_began = 0.0  # time.monotonic() when the batch's latest run started
        self.long_run = False  # a success waits whose run outlasted FLUSH_AFTER: sent before the next start
        self.first = ""  # the id of the batch's first job: its claim charged it, it needs no start mark
        self.marks: list[Started] = []  # jobs of the batch started, their start not said to Redis yet
        self.wakes_at = 0.0  # when the thread looks next on its own (inf: only when woken)
        self.closed = False
        self.thread: threading.Thread | None = None

    def _wake(self) -> None:
        if self.thread is None:
            self.thread = threading.Thread(target=self._watch, name=self.name, daemon=True)
            self.thread.start()
        self.changed.notify()

    def add(self, claim: Claim, result: bytes) -> None:
        with self.changed:
            now = time.monotonic()
            self.items.append(Done(claim, result, now))
            if now - self.run_began > FLUSH_AFTER:
                self.long_run = True
            if len(self.items) == 1:
                self._wake()

    def start_batch(self, claims: list[Claim]) -> None:
        with self.changed:
            self.pending = list(claims)
            self.first = claims[0].id if claims else ""
            self.run_began = time.monotonic()  # not the last batch's: its run would count as this one's
            if len(claims) > 1 and self.release_after is not None:
                self._wake()

    def next_claim(self) -> Claim | None:
        """The batch's next job, about to start (``starting``); None when none is left (run, or given back)."""
        with self.changed:
            if not self.pending:
                return None
            self.run_began = time.monotonic()
            return self.pending.pop(0)

    def starting(self, claim: Claim) -> None:
        """The lane starts ``claim`` now: a long run's success is recorded first, with this start."""
        with self.changed:
            now = time.monotonic()
            if claim.id != self.first:
                self.marks.append((claim, now))
                if self.thread is None or self.wakes_at > now + FLUSH_AFTER:
                    self._wake()
            long_run = self.long_run
        if long_run:
            self.flush()
        with self.changed:
            self.run_began = time.monotonic()

    def ended(self, claim: Claim) -> None:
        """The lane's run of ``claim`` is over: its start mark is moot unless its success waits here."""
        with self.changed:
            last = self.marks[-1][0].id if self.marks else None
            if last == claim.id and not (self.items and self.items[-1].claim.id == last):
                self.marks.pop()

    def unstarted(self) -> list[Claim]:
        """Take the batch's jobs not started yet (a stop gives them back)."""
        with self.changed:
            pending, self.pending = self.pending, []
            return pending

    def take(self) -> tuple[list[Done], list[Claim]]:
        """The successes waiting and the starts not said yet (none of a job whose success is sent)."""
        with self.changed:
            return self._take()

    def _take(self) -> tuple[list[Done], list[Claim]]:
        items, self.items = self.items, []
        marks, self.marks = self.marks, []
        self.long_run = False
        if items and marks:
            done = {item.claim.id for item in items}
            return items, [claim for claim, _ in marks if claim.id not in done]
        return items, [claim for claim, _ in marks]

    def __len__(self) -> int:
        return len(self.items)

    def flush(self) -> None:
        """Send every waiting success and start now (before a job starts after a long run, or the lane exits)."""
        self.record(*self.take())

    def record(self, items: list[Done], marks: list[Claim]) -> None:
        by_queue: dict[str, tuple[list[Done], list[Claim]]] = {}
        for item in items:
            by_queue.setdefault(item.claim.queue, ([], []))[0].append(item)
        for claim in marks:
            by_queue.setdefault(claim.queue, ([], []))[1].append(claim)
        for queue, (done, started) in by_queue.items():
            self.send(queue, done, started)

    def close(self) -> None:
        """Send what waits, and wait for what the thread is sending: the child may exit next."""
        with self.changed:
            self.closed = True
            self.changed.notify()
        self.flush()
        if self.thread is not None and self.thread is not threading.current_thread():
            # A daemon thread dies with its process: a success it was sending would be lost
            # (a --burst worker exited with its last job still running in Redis).
            self.thread.join(CLOSE_WAIT)

    def _due(self, now: float) -> tuple[tuple[list[Done], list[Claim]], list[Claim], float | None]:
        """What is due now (successes and starts to send, jobs to give back), else how long until something is."""
        deadlines = []
        if self.items:
            deadlines.append(self.items[0].ended + FLUSH_AFTER)
        if self.marks:
            deadlines.append(self.marks[0][1] + FLUSH_AFTER)
        if self.pending and self.release_after is not None:
            deadlines.append(self.run_began + self.release_after)
        if not deadlines:
            return ([], []), [], None
        if min(deadlines) > now:
            return ([], []), [], min(deadlines) - now
        sent: tuple[list[Done], list[Claim]] = ([], [])
        released: list[Claim] = []
        if (self.items and self.items[0].ended + FLUSH_AFTER <= now) or (
            self.marks and self.marks[0][1] + FLUSH_AFTER <= now
        ):
            sent = self._take()  # all of them: one round trip
        if self.pending and self.release_after is not None and self.run_began + self.release_after <= now:
            released, self.pending = self.pending, []
        return sent, released, 0.0

    def _watch(self) -> None:
        """Send what waits past FLUSH_AFTER, give back what a long run holds past RELEASE_AFTER."""
        while True:
            with self.changed:
                if self.closed:
                    return
                now = time.monotonic()
                sent, released, wait = self._due(now)
                if wait is None or wait > 0:
                    self.wakes_at = now + wait if wait is not None else float("inf")
                    self.changed.wait(wait)
                    self.wakes_at = 0.0  # looking now: what changed meanwhile is seen without a wake
                    continue
            if released:
                self.release(released)
            self.record(*sent)


def not_recorded(claims: ClaimsRole, items: list[Done], oks: list[bool]) -> None:
    """Say which successes were not recorded: their claim was taken over (or an earlier try landed)."""
    for item, ok in zip(items, oks, strict=True):
        if not ok and not recorded_success(claims, item.claim):
            if record_gone(claims, item.claim):  # the server lost it: no takeover (``server_watch.py``)
                log.warning(
                    "%s %s: its success was not recorded: its record is gone from Redis",
                    item.claim.task,
                    item.claim.id,
                )
                continue
            log.warning(
                "%s %s: its success was not recorded: this worker no longer held its claim "
                "(the lease expired and the job was reclaimed)",
                item.claim.task,
                item.claim.id,
            )
