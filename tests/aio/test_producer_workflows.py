"""``chain(...).adelay()``, ``group(...).adelay()`` and the workflow handle's a-methods, on memory:// and real Redis."""

from __future__ import annotations

from typing import Any

import pytest

from taskforge import JobState, TaskFailed, TaskForge, WorkflowState, chain, group
from taskforge.errors import WorkflowNotFound

from .test_producer import run


def define(app: TaskForge) -> Any:
    @app.task(name="wf.add")
    def add(a: int, b: int) -> int:
        return a + b

    @app.task(name="wf.mul")
    def mul(a: int, b: int) -> int:
        return a * b

    @app.task(name="wf.total")
    def total(values: list[int]) -> int:
        return sum(values)

    @app.task(name="wf.fail", max_attempts=1)
    def fail(value: int) -> None:
        raise RuntimeError(f"refused {value}")

    return add, mul, total, fail


def test_a_chain_through_a_chord_runs_and_is_awaited(app: TaskForge) -> None:
    add, mul, total, _ = define(app)

    async def main() -> None:
        h = await chain(add.s(1, 2), group(mul.s(10), mul.with_options(queue="wf-other").s(2)), total.s()).adelay()
        assert await h.astatus() is WorkflowState.RUNNING
        info = await h.ainfo()
        assert [s.task for s in info.steps] == ["wf.add", "wf.mul", "wf.mul", "wf.total"]
        assert [s.state for s in info.steps] == [JobState.PENDING] * 4  # the first sent, the rest listed
        app.drain()
        assert await h.aresult(timeout=5) == 36
        assert await h.astatus() is WorkflowState.SUCCEEDED
        assert [s.result for s in (await h.ainfo()).steps] == [3, 30, 6, 36]
        assert await app.workflow(h.id).aresult(timeout=5) == 36

    run(app, main)


def test_a_group_returns_its_members_results(app: TaskForge) -> None:
    add, *_ = define(app)

    async def main() -> None:
        h = await group(add.s(i, i) for i in range(5)).adelay()
        alone = await add.s(20, 22).adelay()  # a signature sent by itself is a plain job
        app.drain()
        assert await h.aresult(timeout=5) == [0, 2, 4, 6, 8]
        assert await alone.aresult(timeout=5) == 42

    run(app, main)


def test_a_failed_step_ends_the_workflow_dead(app: TaskForge) -> None:
    add, _, _, fail = define(app)

    async def main() -> None:
        h = await chain(add.s(1, 1), fail.s(), add.s(5)).adelay()
        app.drain()
        with pytest.raises(TaskFailed, match="refused 2") as failed:
            await h.aresult(timeout=5)
        assert failed.value.job_id == f"{h.id}.1"
        assert await h.astatus() is WorkflowState.DEAD
        assert (await h.ainfo()).steps[2].state is JobState.CANCELLED

    run(app, main)


def test_acancel_stops_the_steps_not_started(app: TaskForge) -> None:
    add, *_ = define(app)

    async def main() -> None:
        h = await chain(add.s(1, 1), add.s(2)).adelay()
        assert await h.acancel() is True
        assert await h.acancel() is False
        assert app.drain() == []
        assert await h.astatus() is WorkflowState.CANCELLED
        assert [s.state for s in (await h.ainfo()).steps] == [JobState.CANCELLED] * 2
        with pytest.raises(TaskFailed):
            await h.aresult(timeout=5)

    run(app, main)


def test_a_step_cancelled_by_hand_ends_its_workflow_at_once(app: TaskForge) -> None:
    add, *_ = define(app)

    async def main() -> None:
        h = await chain(add.s(1, 1), add.s(2)).adelay()
        first = (await h.ainfo()).steps[0]
        assert await app.job(first.id).acancel() is True
        assert (await h.astatus()).finished  # told now, not at the reconciler's next pass

    run(app, main)


def test_bad_steps_store_nothing(app: TaskForge) -> None:
    add, *_ = define(app)

    async def main() -> None:
        with pytest.raises(TypeError, match="workflow was not"):
            await chain(add.s(1, 2), add.s(1, 2)).adelay()  # the second gets 3 arguments
        assert app.drain() == []
        with pytest.raises(WorkflowNotFound):
            await app.workflow("no-such-workflow").astatus()
        for call in ("ainfo", "acancel", "aresult"):
            with pytest.raises(WorkflowNotFound):
                await getattr(app.workflow("no-such-workflow"), call)()

    run(app, main)
