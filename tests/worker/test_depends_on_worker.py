"""``depends_on`` in a real worker: the end of a job depended on reaches the waiting job through the
reconciler (the queue's depbox), whether it succeeded or its child died on every attempt."""

from __future__ import annotations

import pytest

from taskforge import JobState, TaskForge

from .conftest import wait_for

pytestmark = [pytest.mark.redis, pytest.mark.slow]


def final(handle, timeout: float = 30) -> JobState:
    return wait_for(lambda: handle.status() if handle.status().finished else None, timeout, f"{handle.id} to end")


def test_a_worker_runs_a_dependent_after_its_parent_or_cancels_it(start_worker, producer: TaskForge, side) -> None:
    record, crash = producer.task_for("userapp.record"), producer.task_for("userapp.always_crash")
    parent = record.delay("parent")
    child = record.apply_async(("child",), depends_on=parent)
    doomed = crash.delay("doomed")
    orphan = record.apply_async(("orphan",), depends_on=[parent, doomed])
    anyway = record.apply_async(("anyway",), depends_on=doomed, allow_failure=True)
    start_worker("-c", "1")
    assert final(child) is JobState.SUCCEEDED
    assert child.info().started_at >= parent.info().finished_at
    assert final(orphan) is JobState.CANCELLED and doomed.id in (orphan.info().error or "")
    assert final(anyway) is JobState.SUCCEEDED
    assert side.llen("side:child") == 1 and side.llen("side:anyway") == 1 and not side.exists("side:orphan")
