"""Celery's and Dramatiq's empty groups: a group of no member succeeds with [], a chord with no header runs its body."""

from __future__ import annotations

import asyncio

from taskforge import JobState, TaskForge, WorkflowState, chain, chord, group


def test_an_empty_group_succeeds_with_an_empty_list(app: TaskForge) -> None:
    handle = group().delay()
    assert handle.result(timeout=1) == [] and handle.status() is WorkflowState.SUCCEEDED
    assert handle.info().steps == [] and group([]).delay().get(timeout=1) == []

    async def awaited() -> None:
        empty = await group(group()).adelay()
        assert await empty.aresult(timeout=1) == [[]] and await empty.astatus() is WorkflowState.SUCCEEDED

    asyncio.run(awaited())


def test_a_chord_with_no_header_runs_its_body_with_an_empty_list(app: TaskForge) -> None:
    @app.task
    def total(values: list[int]) -> int:
        return sum(values) + 100

    @app.task
    def double(n: int) -> int:
        return n * 2

    handle = chord([])(total.s())
    app.drain()
    assert handle.result(timeout=1) == 100
    # an empty group inside a chain passes the wait on: the next step still waits for the one before
    later = chain(double.s(4), group(), total.s()).delay()
    app.drain()
    assert later.result(timeout=1) == 100
    assert [step.state for step in later.info().steps] == [JobState.SUCCEEDED, JobState.SUCCEEDED]
    assert later.info().steps[0].finished_at <= later.info().steps[1].started_at
