"""Durable steps and sleeps with a real worker: a child killed inside a step, a sleep that frees the child."""

from __future__ import annotations

import time

from taskforge import JobState

from .conftest import final, wait_for


def test_a_child_killed_inside_step_two_never_runs_step_one_again(start_worker, producer, side) -> None:
    start_worker("-c", "1")
    handle = producer.send("userapp.stepwise", "s")
    assert final(handle) is JobState.SUCCEEDED
    info = handle.info()
    assert info.result == ["first", "second"] and info.attempts == 2
    assert side.get("side:s:one") == b"1"  # step one ran in the first run only
    assert side.get("side:s:two") == b"2"  # step two: killed inside, then run again
    assert info.steps == {"one": "first", "two": "second"}


def test_sleep_frees_a_one_child_worker_and_resumes_with_steps_and_attempts(start_worker, producer, side) -> None:
    start_worker("-c", "1")
    napping = producer.send("userapp.napper", "n", 2.0)
    wait_for(lambda: napping.status() is JobState.SCHEDULED, 20, "the job to go to sleep")
    slept_at = time.time()
    other = producer.send("userapp.record", "other")
    assert final(other) is JobState.SUCCEEDED  # the only child is free meanwhile
    assert napping.status() is JobState.SCHEDULED
    assert final(napping) is JobState.SUCCEEDED
    info = napping.info()
    assert info.result == [1, "after"] and info.attempts == 1 and info.steps == {"before": 1, "after": "after"}
    assert side.get("side:n:before") == b"1"
    [woke] = side.lrange("side:n:woke", 0, -1)
    assert float(woke) >= slept_at + 1.0  # not before its time (2 s from the sleep, less the wait's poll)
