"""Durable steps with a real worker: a child SIGKILLed inside step 2 never runs step 1 again."""

from __future__ import annotations

from taskforge import JobState

from .conftest import final


def test_a_child_killed_inside_step_two_never_runs_step_one_again(start_worker, producer, side) -> None:
    start_worker("-c", "1")
    handle = producer.send("userapp.stepwise", "s")
    assert final(handle) is JobState.SUCCEEDED
    info = handle.info()
    assert info.result == ["first", "second"] and info.attempts == 2
    assert side.get("side:s:one") == b"1"  # step one ran in the first run only
    assert side.get("side:s:two") == b"2"  # step two: killed inside, then run again
    assert info.steps == {"one": "first", "two": "second"}
