"""A join inside a running task, in process: ``app.drain()`` and eager mode run the job waited on first.

In a worker such a join is refused (``tests/worker/test_join_in_task.py``):
the caller holds the slot the job may need. In process nothing else would
ever run that job, so the join runs it, through the same claim as any
drained job, then returns its value. A job the drain cannot run (scheduled
for later, the caller itself) is a ``RuntimeError`` at once, never a wait.

Every join here has a short timeout: without the rule it would wait that
long and fail with ``TimeoutError``, so a regression fails fast.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import pytest

from taskforge import JobState, TaskForge, current_job, group
from taskforge.testing import set_eager

WAIT = 2.0  # what a join would hang for, had it not been run first


@dataclass
class Joins:
    """An app whose tasks join other jobs of the same app, and its tasks."""

    app: TaskForge
    add: Any
    joiner: Any
    deep: Any
    gather: Any
    ajoiner: Any
    later: Any
    itself: Any
    getter: Any
    allowed: Any


def joins(url: str) -> Joins:
    app = TaskForge("joins", broker=url)

    @app.task(name="add", max_attempts=1)
    def add(a: int, b: int) -> int:
        return a + b

    @app.task(name="joiner", max_attempts=1)
    def joiner(a: int, b: int) -> int:
        return add.delay(a, b).result(timeout=WAIT) * 10

    @app.task(name="deep", max_attempts=1)
    def deep() -> int:
        return joiner.delay(1, 2).result(timeout=WAIT) + 1  # a join whose job joins in turn

    @app.task(name="gather", max_attempts=1)
    def gather() -> list[int]:
        return group(add.s(1, 1), add.s(2, 2)).delay().get(timeout=WAIT)

    @app.task(name="ajoiner", max_attempts=1)
    async def ajoiner(a: int, b: int) -> int:
        await asyncio.sleep(0)
        return await add.delay(a, b).aresult(timeout=WAIT) * 100

    @app.task(name="later", max_attempts=1)
    def later() -> int:
        return add.apply_in(3600, 1, 2).result(timeout=WAIT)

    @app.task(name="itself", max_attempts=1)
    def itself() -> int:
        return app.job(current_job().id).result(timeout=WAIT)

    @app.task(name="getter", max_attempts=1)
    def getter() -> int:
        return add.delay(5, 5).get(timeout=WAIT)

    @app.task(name="allowed", max_attempts=1)
    def allowed() -> int:
        return add.delay(3, 4).result(timeout=WAIT, allow_join=True)

    return Joins(app, add, joiner, deep, gather, ajoiner, later, itself, getter, allowed)


@pytest.fixture
def tasks(broker_url: str) -> Joins:
    return joins(broker_url)  # real Redis: a database the fixture emptied


def test_drain_runs_the_joined_job_first_and_reports_both(tasks: Joins) -> None:
    h = tasks.joiner.delay(1, 2)
    ran = tasks.app.drain()
    assert h.result(timeout=0) == 30, h.info().error
    assert [job.task for job in ran] == ["add", "joiner"]  # the joined job ran once, inside the join
    assert all(job.state is JobState.SUCCEEDED for job in ran)
    assert tasks.app.drain() == []


def test_drain_runs_nested_joins_and_celery_spellings(tasks: Joins) -> None:
    deep, gathered, got = tasks.deep.delay(), tasks.gather.delay(), tasks.getter.delay()
    allowed = tasks.allowed.delay()
    tasks.app.drain()
    assert allowed.result(timeout=0) == 7, allowed.info().error
    assert deep.result(timeout=0) == 31, deep.info().error
    assert gathered.result(timeout=0) == [2, 4], gathered.info().error
    assert got.result(timeout=0) == 10, got.info().error


def test_drain_runs_the_job_an_async_task_awaits(tasks: Joins) -> None:
    h = tasks.ajoiner.delay(2, 3)
    tasks.app.drain()
    assert h.result(timeout=0) == 500, h.info().error


def test_adrain_runs_the_job_an_async_task_awaits(tasks: Joins) -> None:
    h = tasks.ajoiner.delay(1, 1)
    ran = asyncio.run(tasks.app.adrain())
    assert h.result(timeout=0) == 200, h.info().error
    assert [job.task for job in ran] == ["add", "ajoiner"]


@pytest.mark.parametrize("name", ["later", "itself"])
def test_a_join_the_drain_cannot_run_fails_at_once_saying_why(tasks: Joins, name: str) -> None:
    h = getattr(tasks, name).delay()
    tasks.app.drain()
    info = h.info()
    assert info.state is JobState.DEAD
    assert info.error is not None and info.error.startswith("RuntimeError: "), info.error
    assert "could not run it" in info.error and "advance=" in info.error, info.error


def test_eager_mode_joins_return_the_value(tasks: Joins) -> None:
    set_eager(tasks.app, True)
    assert tasks.joiner.delay(4, 5).result(timeout=0) == 90
    assert tasks.deep.delay().result(timeout=0) == 31
    assert tasks.gather.delay().result(timeout=0) == [2, 4]
    assert tasks.ajoiner.delay(1, 2).result(timeout=0) == 300


def test_eager_mode_a_join_on_a_scheduled_job_fails_at_once(tasks: Joins) -> None:
    set_eager(tasks.app, True)
    info = tasks.later.delay().info()
    assert info.state is JobState.DEAD
    assert info.error is not None and info.error.startswith("RuntimeError: "), info.error


def test_outside_a_task_a_join_waits_as_before(tasks: Joins) -> None:
    h = tasks.add.delay(1, 2)
    with pytest.raises(TimeoutError):
        h.result(timeout=0.1)
    tasks.app.drain()
    assert h.result(timeout=1) == 3


def test_eager_mode_inside_a_running_loop_runs_joins(tasks: Joins) -> None:
    """A delay() from async code runs an async job on a loop of its own thread: the join there still
    sees the drain it runs in (and is not refused as a worker's would be)."""
    set_eager(tasks.app, True)

    async def main() -> int:
        return tasks.ajoiner.delay(2, 2).result(timeout=0)

    assert asyncio.run(main()) == 400
