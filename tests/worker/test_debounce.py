"""A debounced task with a real worker: one run per burst and key, with the burst's last arguments."""

from __future__ import annotations

import time

import pytest

from taskforge import JobState, TaskForge

from .conftest import final, wait_for

pytestmark = [pytest.mark.redis, pytest.mark.slow]


def test_a_burst_runs_once_per_key_with_its_last_arguments(start_worker, redis_url: str, side) -> None:
    producer = TaskForge("producer", broker=redis_url)

    # The producer's definition of the worker's task: debounce is decided where the call is made.
    @producer.task(name="userapp.debounced", key="name", debounce=0.5)
    def debounced(name: str, value: int) -> None:
        return None

    start_worker("-c", "2")
    handles = []
    for value in range(10):
        handles.append(debounced.delay("a", value))
        handles.append(debounced.delay("b", 100 + value))
        time.sleep(0.02)
    assert len({h.id for h in handles}) == 2
    assert all(final(h) is JobState.SUCCEEDED for h in handles)
    wait_for(lambda: side.llen("side:debounced:a") and side.llen("side:debounced:b"), 10, "both runs")
    time.sleep(1.0)  # no second run comes
    assert side.lrange("side:debounced:a", 0, -1) == [b"9"]
    assert side.lrange("side:debounced:b", 0, -1) == [b"109"]
    # The burst is over: the next call is a new job, run once more.
    later = debounced.delay("a", 42)
    assert later.id != handles[0].id and final(later) is JobState.SUCCEEDED
    assert side.lrange("side:debounced:a", 0, -1) == [b"9", b"42"]
