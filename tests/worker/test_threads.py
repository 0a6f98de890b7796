"""``taskforge worker -t N``: N lanes (threads) per child, checked with real processes.

A killed child takes every lane with it, so these tests pin down who pays:
a crash fails every job the child held (the attempt counts, the job is
retried); a kill aimed at one job (its timeout) gives the other lanes' jobs
back unrun, their attempt refunded.
"""

from __future__ import annotations

import os
import signal

import pytest

from taskforge import JobState

from .conftest import final, wait_for

pytestmark = [pytest.mark.redis, pytest.mark.slow]


def test_the_lanes_of_one_child_run_jobs_side_by_side(start_worker, producer, side) -> None:
    worker = start_worker("-c", "1", "-t", "4")
    handles = [producer.send("userapp.sleepy", "s", 3) for _ in range(4)]
    # All four started before any finished: four jobs in flight in one process.
    wait_for(lambda: side.llen("side:s:started") == 4, 20, "four jobs to start")
    assert side.llen("side:s") == 0
    assert len(set(side.lrange("side:s:started", 0, -1))) == 1  # one child process
    assert [final(h) for h in handles] == [JobState.SUCCEEDED] * 4
    assert all(h.info().attempts == 1 for h in handles)
    assert worker.proc.poll() is None


def test_a_killed_child_loses_none_of_its_lanes_jobs(start_worker, producer, side) -> None:
    worker = start_worker("-c", "1", "-t", "3")
    handles = [producer.send("userapp.sleepy", "k", 4) for _ in range(3)]
    wait_for(lambda: side.llen("side:k:started") == 3, 20, "three jobs to start")
    [child] = set(side.lrange("side:k:started", 0, -1))  # sleepy records its process id
    os.kill(int(child), signal.SIGKILL)
    assert [final(h) for h in handles] == [JobState.SUCCEEDED] * 3
    # Each was recorded as WorkerCrashed (a worker loss, not an attempt) and run again.
    assert [(h.info().attempts, h.info().losses) for h in handles] == [(1, 1)] * 3
    assert side.llen("side:k") == 3
    assert worker.proc.poll() is None


def test_a_timeout_in_one_lane_gives_the_other_lanes_jobs_back_unrun(start_worker, producer, side) -> None:
    start_worker("-c", "1", "-t", "2")
    slow = producer.send("userapp.too_slow", "t")  # timeout=1, max_attempts=2
    wait_for(lambda: side.get("side:t:runs"), 20, "the slow job to start")
    other = producer.send("userapp.sleepy", "o", 3)
    assert final(slow) is JobState.DEAD
    assert "timeout of 1 s" in slow.info().error
    assert final(other) is JobState.SUCCEEDED
    # Killed with the slow job's child at least once, yet never charged for it.
    assert other.info().attempts == 1
    assert side.llen("side:o") == 1


def test_sigterm_lets_every_lane_finish_its_job(start_worker, producer, side) -> None:
    worker = start_worker("-c", "1", "-t", "2")
    handles = [producer.send("userapp.sleepy", "g", 2) for _ in range(2)]
    wait_for(lambda: side.llen("side:g:started") == 2, 20, "both jobs to start")
    worker.signal(signal.SIGTERM)
    assert worker.wait(30) == 0
    assert [h.status() for h in handles] == [JobState.SUCCEEDED] * 2


def test_a_threaded_child_is_recycled_after_max_jobs(start_worker, producer, side) -> None:
    worker = start_worker("-c", "1", "-t", "2", "--max-jobs-per-child", "3")
    handles = [producer.send("userapp.record_pid", "r") for _ in range(8)]
    assert [final(h) for h in handles] == [JobState.SUCCEEDED] * 8
    pids = side.lrange("side:r", 0, -1)
    # At most 3 per child, plus the job the other lane had already started when the third was counted.
    assert max(pids.count(pid) for pid in set(pids)) <= 4, pids
    assert len(set(pids)) >= 2
    assert worker.proc.poll() is None
