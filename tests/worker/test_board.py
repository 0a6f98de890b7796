"""The board: a lane's later jobs of a batch told through shared memory, read by the supervisor."""

from __future__ import annotations

import multiprocessing

from taskforge.worker.board import Board, LaneBatches
from taskforge.worker.messages import JobStarted


def announce(lane: int, number: int, ids: list[str]) -> JobStarted:
    rest = tuple((job_id, "t", 1, None, 3, None) for job_id in ids[1:])
    return JobStarted(lane, ids[0], "tok", "q", "t", 1, None, 3, None, rest, number)


def test_the_supervisor_follows_each_lane_through_its_batch() -> None:
    board = Board.new(multiprocessing.get_context("spawn"), 2)
    batches = LaneBatches(board)
    batches.announced(announce(1, 7, ["a", "b", "c", "d"]))
    assert batches.advanced() == []  # the board still says nothing of batch 7
    assert [j.job_id for j in batches.unstarted()] == ["b", "c", "d"]
    board.write(1, 7, 2)  # the lane skipped past b (ran it between two looks) and runs c
    seen = batches.advanced()
    assert [job.job_id for job, _ in seen] == ["b", "c"]
    assert seen[-1][1] == board.read(1)[0]  # c's start is the lane's own stamp
    assert [j.job_id for j in batches.unstarted()] == ["d"]
    assert [j.job_id for j in batches.passed()] == ["a", "b"]
    assert batches.advanced() == []  # nothing new
    board.write(1, 6, 3)  # an older batch's number: ignored
    assert batches.advanced() == []
    batches.released(1, ("d",))
    assert batches.unstarted() == []
    batches.idle(1)
    assert batches.passed() == [] and batches.unstarted() == []


def test_a_later_job_said_by_message_moves_the_lane_on_too() -> None:
    batches = LaneBatches(None)  # a supervisor keeping metrics gets a message per job
    batches.announced(announce(0, 1, ["a", "b", "c"]))
    batches.announced(JobStarted(0, "b", "tok", "q", "t", 1, None, 3, None, (), 1))
    assert [j.job_id for j in batches.unstarted()] == ["c"]
    assert [j.job_id for j in batches.passed()] == ["a"]
    batches.announced(JobStarted(0, "x", "tok2", "q", "t", 1, None, 3, None, (), 2))  # a job of no batch
    assert batches.unstarted() == [] and batches.passed() == []
