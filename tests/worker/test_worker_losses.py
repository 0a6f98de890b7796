"""A lost worker is not the task's failure: losses have a budget of their own (``max_worker_losses``).

A whole worker killed mid-job, or a child process that dies under its job,
costs the job a loss, not an attempt: a ``max_attempts=1`` job survives a
``kill -9``, and a job that kills its process every time ends dead
(``WorkerLost``) once ``max_worker_losses`` (2) are spent, whatever its
``max_attempts``. A run cut short by a shutdown's grace ending costs nothing:
the job goes back, recorded as interrupted, and runs again.
"""

from __future__ import annotations

import os
import signal

import pytest

from taskforge import JobState
from taskforge.cli.job import format_job

from .conftest import final, wait_for
from .test_rescue import listed

pytestmark = [pytest.mark.redis, pytest.mark.slow]


def test_a_job_without_retries_survives_a_kill_9_of_its_whole_worker(start_worker, producer, side) -> None:
    first = start_worker("-c", "1", "--grace", "1")
    handle = producer.send("userapp.slow_first", "lost", 60)
    wait_for(lambda: side.llen("side:lost:started"), 30, "the job to start")
    listed(producer, first)
    os.killpg(first.pgid, signal.SIGKILL)
    first.wait(10)
    start_worker("-c", "1", "--grace", "1")  # the same-host rescue takes the dead worker's job back at once
    assert final(handle, 40) is JobState.SUCCEEDED
    info = handle.info()
    assert handle.result(timeout=1) == 2
    assert (info.attempts, info.losses) == (1, 1)  # the lost run used a loss, not the only attempt
    assert info.error is not None and info.error.startswith("WorkerLost")
    assert "lost runs" in format_job(info)


@pytest.mark.parametrize("task", ["kills_its_child", "kills_its_child_often"])
def test_a_job_that_kills_its_process_every_time_ends_dead_after_its_losses(task, start_worker, producer, side) -> None:
    """max_attempts=1 and max_attempts=5 alike: three runs (the default max_worker_losses=2, plus one), then dead."""
    worker = start_worker("-c", "1")
    handle = producer.send(f"userapp.{task}", task)
    assert final(handle, 60) is JobState.DEAD
    info = handle.info()
    assert int(side.get(f"side:{task}:runs") or 0) == 3
    assert info.losses == 3 and info.attempts == 0
    assert info.error_type == "taskforge.errors.WorkerLost"
    assert info.error is not None and "max_worker_losses" in info.error
    lines = [line for line in worker.output().splitlines() if f"job {handle.id} attempt" in line]
    assert sum("its worker was lost, which uses no attempt: back in line" in line for line in lines) == 2, lines
    assert not any("; retrying" in line for line in lines), lines  # a lost run is not said as a retry


def test_a_run_cut_short_by_shutdown_is_recorded_interrupted_and_runs_again(start_worker, producer, side) -> None:
    first = start_worker("-c", "1", "--grace", "1")
    handle = producer.send("userapp.slow_first", "stopped", 60)
    wait_for(lambda: side.llen("side:stopped:started"), 30, "the job to start")
    first.signal(signal.SIGTERM)
    first.wait(20)
    info = handle.info()
    assert info.state is JobState.PENDING
    assert (info.attempts, info.interrupted) == (0, 1)
    assert info.error is not None and info.error.startswith("Interrupted: the worker stopped (SIGTERM")
    assert info.error_type == "taskforge.errors.Interrupted"
    assert "cut short by a worker's shutdown" in format_job(info)  # what `taskforge job` prints
    start_worker("-c", "1")
    assert final(handle, 30) is JobState.SUCCEEDED
    after = handle.info()
    assert (after.attempts, after.interrupted, after.losses) == (1, 1, 0)
