"""Which job of its batch each lane runs, told through shared memory instead of a message per job.

A lane says it started a batch in one pipe message (``JobStarted``, whose
``batch`` lists the other jobs it claimed with it). For each later job of
the batch it only writes three numbers into its row of the child's board,
a shared array the supervisor was given at spawn: when the job started, the
batch's number, and the job's place in it. The supervisor reads the board
on its tick, and before it judges a timeout or a dead child, so it knows
which job runs without a message to encode and two system calls per job.

``LaneBatches`` is the supervisor's side for one child: the batches
announced, how far each lane has gone through its own, and the jobs not
started yet (renewed, and given back unrun if the child dies).
"""

from __future__ import annotations

import time
from typing import Any

from .messages import JobStarted

ROW = 3  # per lane: started (time.monotonic()), batch number, place in the batch (0: the announced job)


class Board:
    """A child's rows, one per lane; written by its lanes, read by the supervisor."""

    def __init__(self, shared: Any) -> None:
        self.shared = shared  # a multiprocessing RawArray of doubles, ROW per lane

    @classmethod
    def new(cls, ctx: Any, lanes: int) -> Board:
        return cls(ctx.RawArray("d", ROW * max(1, lanes)))

    def write(self, lane: int, batch: int, place: int) -> None:
        """The lane started the job at ``place`` of its batch ``batch`` (its place last: the reader keys on it)."""
        row = ROW * lane
        shared = self.shared
        shared[row] = time.monotonic()
        shared[row + 1] = batch
        shared[row + 2] = place

    def read(self, lane: int) -> tuple[float, int, int]:
        row = ROW * lane
        shared = self.shared
        place = int(shared[row + 2])
        return shared[row], int(shared[row + 1]), place

    def lanes(self) -> int:
        return len(self.shared) // ROW


class LaneBatch:
    """A batch a lane announced: its number, the jobs after the announced one, how far the lane is."""

    __slots__ = ("number", "first", "jobs", "place", "given_back")

    def __init__(self, number: int, first: JobStarted, jobs: list[JobStarted]) -> None:
        self.number = number
        self.first = first  # the announced job, place 0
        self.jobs = jobs  # place 1 is jobs[0]
        self.place = 0
        self.given_back: set[str] = set()

    def passed(self) -> list[JobStarted]:
        """The jobs the lane ran and moved on from: their successes may still wait in its outbox."""
        return [self.first, *self.jobs[: self.place - 1]] if self.place else []

    def unstarted(self) -> list[JobStarted]:
        return [job for job in self.jobs[self.place :] if job.job_id not in self.given_back]


class LaneBatches:
    """The supervisor's view of one child's batches."""

    def __init__(self, board: Board | None) -> None:
        self.board = board
        self.batches: dict[int, LaneBatch] = {}

    def announced(self, started: JobStarted) -> None:
        """A lane started a job: a new batch when it names others, a later job of the lane's batch
        (said by message when the supervisor keeps metrics), or a job of no batch."""
        if not started.batch:
            batch = self.batches.get(started.lane)
            ids = [job.job_id for job in batch.jobs] if batch is not None else []
            if batch is not None and started.batch_no == batch.number and started.job_id in ids:
                batch.place = max(batch.place, ids.index(started.job_id) + 1)
            else:
                self.batches.pop(started.lane, None)
            return
        jobs = [
            JobStarted(started.lane, job_id, started.token, started.queue, task, attempts, timeout, tries, soft)
            for job_id, task, attempts, timeout, tries, soft in started.batch
        ]
        self.batches[started.lane] = LaneBatch(started.batch_no, started, jobs)

    def idle(self, lane: int) -> None:
        self.batches.pop(lane, None)

    def released(self, lane: int, job_ids: tuple[str, ...]) -> None:
        batch = self.batches.get(lane)
        if batch is not None:
            batch.given_back.update(job_ids)

    def advanced(self) -> list[tuple[JobStarted, float]]:
        """The jobs lanes started since the last look, in order, each with when it started."""
        out: list[tuple[JobStarted, float]] = []
        if self.board is None:
            return out
        for lane, batch in self.batches.items():
            started, number, place = self.board.read(lane)
            if number != batch.number or place <= batch.place:
                continue
            place = min(place, len(batch.jobs))
            for at in range(batch.place + 1, place + 1):
                out.append((batch.jobs[at - 1], started if at == place else time.monotonic()))
            batch.place = place
        return out

    def unstarted(self) -> list[JobStarted]:
        return [job for batch in self.batches.values() for job in batch.unstarted()]

    def passed(self) -> list[JobStarted]:
        """Jobs of the lanes' batches run and passed: if the child died, their successes may be lost
        with it (a batch's successes go out with the next claim, or within about 5 ms)."""
        return [job for batch in self.batches.values() for job in batch.passed()]
