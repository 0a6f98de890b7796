"""Workflows run to the end in the calling process: ``app.drain()`` and eager mode, on memory:// and real Redis.

Eager mode is the testing kit's after-enqueue callback (``set_eager(app, True)``,
or ``taskforge_app(app, eager=True)``): a workflow's ``delay()`` stores it and
sends its first steps, then the callback drains, and each step's report
sends the next one, so the whole workflow has ended when ``delay()`` returns.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from taskforge import JobState, TaskFailed, TaskForge, WorkflowState, chain, group
from taskforge.testing import is_eager, set_eager
from taskforge.workflows import resume as resume_module
from taskforge.workflows.canvas import Chain

from . import wfapp
from .conftest import bound
from .wfapp import FIXED, add, ident, mul, refuse, refuse_until, total


def composite() -> tuple[Chain, list[object]]:
    """A chain through a chord, a nested group and per-step queues; and its result."""
    flow = chain(
        add.s(1, 2),
        group(mul.s(10), chain(mul.with_options(queue="wf-img").s(2), group(ident.s(), mul.s(2))), ident.s()),
        ident.with_options(queue="wf-low", priority="high").s(),
    )
    return flow, [30, [6, 12], 3]


@pytest.fixture
def drained_app(broker_url: str) -> Iterator[TaskForge]:
    with bound(wfapp.app, broker_url) as app:
        yield app


def test_drain_runs_a_workflow_to_the_end(drained_app: TaskForge) -> None:
    flow, expected = composite()
    h = flow.delay()
    assert h.status() is WorkflowState.RUNNING
    ran = drained_app.drain()
    assert h.status() is WorkflowState.SUCCEEDED
    assert h.result(timeout=0) == expected
    steps = h.info().steps
    assert sorted(job.id for job in ran) == sorted(step.id for step in steps)
    assert [s.queue for s in steps] == ["wf", "wf", "wf-img", "wf", "wf", "wf", "wf-low"]
    assert drained_app.drain() == []


def test_drain_runs_a_failing_workflow_to_its_end(drained_app: TaskForge) -> None:
    h = chain(add.s(1, 2), refuse.s(), ident.s(), on_failure=ident.si("cleanup")).delay()
    drained_app.drain()
    assert h.status() is WorkflowState.DEAD
    with pytest.raises(TaskFailed) as caught:
        h.result(timeout=0)
    assert (caught.value.task, caught.value.job_id) == (refuse.name, f"{h.id}.1")
    assert [s.state for s in h.info().steps] == [
        JobState.SUCCEEDED,
        JobState.DEAD,
        JobState.CANCELLED,
        JobState.SUCCEEDED,  # on_failure
    ]
    assert drained_app.job(f"{h.id}.3").result(timeout=0) == "cleanup"


def test_a_drained_dead_workflow_resumes_with_retry(drained_app: TaskForge) -> None:
    key = f"resume-{id(drained_app)}-{drained_app.broker.url}"
    h = chain(add.s(1, 2), group(refuse_until.s(key), mul.s(2)), total.s(), on_failure=ident.s()).delay()
    drained_app.drain()
    assert h.status() is WorkflowState.DEAD
    summary = drained_app.job(f"{h.id}.4").result(timeout=0)
    assert (summary["id"], summary["task"]) == (f"{h.id}.1", refuse_until.name)
    assert "refused 3 until fixed" in summary["error"] and "ValueError" in summary["traceback"]
    FIXED.add(key)
    assert h.retry() is True
    assert h.status() is WorkflowState.RUNNING
    drained_app.drain()
    assert h.result(timeout=0) == 9
    assert [s.state for s in h.info().steps] == [JobState.SUCCEEDED] * 4
    assert (
        drained_app.broker.jobs.read("wf", f"{h.id}.4") is None
    )  # dropped at the resume: a second death sends it again
    assert h.retry() is False


def test_eager_fixture_finishes_the_workflow_inside_delay(taskforge_app: Callable[..., TaskForge]) -> None:
    app = taskforge_app(add.app, eager=True)
    assert is_eager(app)
    flow, expected = composite()
    h = flow.delay()
    assert h.status() is WorkflowState.SUCCEEDED
    assert h.result(timeout=0) == expected
    h = chain(group(ident.s(i) for i in range(20)), total.s()).delay()
    assert h.result(timeout=0) == sum(range(20))


def test_eager_mode_runs_a_resumed_workflow_inside_retry(taskforge_app: Callable[..., TaskForge]) -> None:
    app = taskforge_app(add.app, eager=True)
    key = f"eager-{id(app)}"
    h = chain(add.s(1, 2), refuse_until.s(key), mul.s(2)).delay()
    assert h.status() is WorkflowState.DEAD
    FIXED.add(key)
    assert h.retry() is True
    assert h.status() is WorkflowState.SUCCEEDED
    assert h.result(timeout=0) == 6


def test_eager_mode_runs_a_resumed_workflow_inside_aretry(taskforge_app: Callable[..., TaskForge]) -> None:
    app = taskforge_app(add.app, eager=True)
    key = f"eager-async-{id(app)}"
    h = chain(add.s(1, 2), refuse_until.s(key), mul.s(2)).delay()
    assert h.status() is WorkflowState.DEAD
    FIXED.add(key)
    assert asyncio.run(h.aretry()) is True  # as retry(): the app hears of the steps sent again
    assert h.status() is WorkflowState.SUCCEEDED
    assert h.result(timeout=0) == 6


def test_eager_switched_on_by_hand_on_real_redis(redis_url: str) -> None:
    with bound(wfapp.app, redis_url) as app:
        set_eager(app, True)
        try:
            h = chain(add.s(2, 2), group(mul.s(2), mul.s(3)), total.s()).delay()
            assert h.status() is WorkflowState.SUCCEEDED
            assert h.result(timeout=0) == 20
        finally:
            set_eager(app, False)
        h = chain(add.s(2, 2), mul.s(2)).delay()
        assert h.status() is WorkflowState.RUNNING  # eager is off again: nothing ran
        app.drain()
        assert h.result(timeout=0) == 8


def test_app_job_of_a_dead_step_retries_it_and_resumes_its_workflow(drained_app: TaskForge) -> None:
    key = f"step-retry-{id(drained_app)}-{drained_app.broker.url}"
    h = chain(add.s(1, 2), group(refuse_until.s(key), mul.s(2)), total.s()).delay()
    drained_app.drain()
    assert h.status() is WorkflowState.DEAD
    step = drained_app.job(f"{h.id}.1")
    assert step.status() is JobState.DEAD
    FIXED.add(key)
    assert step.retry() is True  # the step's own handle, as an operator holding only its id would
    assert h.status() is WorkflowState.RUNNING
    drained_app.drain()
    assert h.result(timeout=0) == 9
    assert step.retry() is False  # succeeded now: nothing to retry


def test_app_job_retry_of_a_plain_dead_job_runs_it_again(drained_app: TaskForge) -> None:
    key = f"plain-retry-{id(drained_app)}-{drained_app.broker.url}"
    handle = refuse_until.delay(5, key)
    drained_app.drain()
    assert handle.status() is JobState.DEAD
    FIXED.add(key)
    assert asyncio.run(drained_app.job(handle.id).aretry()) is True
    assert handle.status() is JobState.PENDING
    drained_app.drain()
    assert handle.status() is JobState.SUCCEEDED


def test_a_resume_sends_the_steps_free_to_go_before_its_dead_steps_can_run_again(
    drained_app: TaskForge, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A revived step that died again before the resume's send would stop nothing, and the
    step sent after that stop would wait, orphaned, in a dead workflow: so the dead steps go
    back in line only after the send."""
    key = f"order-{id(drained_app)}-{drained_app.broker.url}"
    h = chain(add.s(1, 2), group(refuse_until.s(key), mul.s(2)), total.s()).delay()
    drained_app.drain()
    assert h.status() is WorkflowState.DEAD
    failing = f"{h.id}.1"
    states_at_send: list[JobState] = []
    real_sending = resume_module.sending  # the resume's plan of its send

    def watching_sending(settings: Any, workflow: str, steps: Any, *rest: Any) -> Any:
        states_at_send.append(drained_app.job(failing).status())
        return real_sending(settings, workflow, steps, *rest)

    monkeypatch.setattr(resume_module, "sending", watching_sending)
    FIXED.add(key)
    assert h.retry() is True
    assert states_at_send == [JobState.DEAD]  # not yet runnable while the others are sent
    assert drained_app.job(failing).status() is JobState.PENDING
    drained_app.drain()
    assert h.result(timeout=0) == 9
