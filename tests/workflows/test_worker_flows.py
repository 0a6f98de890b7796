"""Chains, groups, chords and their nesting, run by a real worker on real Redis, seen through the handle."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import redis

from taskforge import ConfigurationError, JobState, Priority, TaskForge, WorkflowNotFound, WorkflowState, chain, group
from taskforge.broker.keys import WorkflowKeys, workflow_index
from taskforge.workflows.canvas import Chain, Group

from .conftest import RESULT_TIMEOUT, Gate, runs, wait_for
from .wfapp import add, const, gated, ident, mark, mul, opener, total

pytestmark = [pytest.mark.redis]


def test_each_step_gets_the_previous_result(live_app: TaskForge, side: redis.Redis) -> None:
    h = chain(add.s(1, 2), mul.s(10), add.s(5)).delay()
    assert h.result(timeout=RESULT_TIMEOUT) == 35
    assert h.status() is WorkflowState.SUCCEEDED
    info = h.info()
    assert info.id == h.id and info.state is WorkflowState.SUCCEEDED and info.error is None
    assert [s.id for s in info.steps] == [f"{h.id}.{i}" for i in range(3)]
    assert [s.task for s in info.steps] == [add.name, mul.name, add.name]
    assert [s.args for s in info.steps] == [(1, 2), (3, 10), (30, 5)]
    assert [s.result for s in info.steps] == [3, 30, 35]
    assert all(s.state is JobState.SUCCEEDED for s in info.steps)
    assert info.created_at is not None and info.finished_at is not None and info.created_at <= info.finished_at
    # Kept for the app's retention, like a job's record, then gone.
    ttl = side.pttl(WorkflowKeys(h.id).record)
    assert 0 < ttl <= live_app.retention * 1000
    # Listed under its final state once the worker settled it (just after it ended).
    wait_for(lambda: h.id in live_app.broker.ledger.workflow_ids("succeeded"), RESULT_TIMEOUT, "listed as succeeded")
    assert side.zscore(workflow_index("running"), h.id) is None


def test_si_ignores_the_previous_result(live_app: TaskForge, side: redis.Redis, token: str) -> None:
    h = chain(add.s(1, 2), const.si("fresh"), mark.s(token)).delay()
    assert h.result(timeout=RESULT_TIMEOUT) == "fresh"
    assert h.info().steps[1].args == ("fresh",)
    assert runs(side, token) == ["'fresh'"]


def test_each_step_keeps_its_own_queue_and_priority(live_app: TaskForge) -> None:
    h = chain(
        add.s(1, 2),
        mul.with_options(queue="wf-img", priority="high").s(10),
        ident.with_options(queue="wf-low", priority="low").s(),
    ).delay()
    assert h.result(timeout=RESULT_TIMEOUT) == 30
    steps = h.info().steps
    assert [(s.queue, s.priority) for s in steps] == [
        ("wf", Priority.NORMAL),
        ("wf-img", Priority.HIGH),
        ("wf-low", Priority.LOW),
    ]
    # Each step is a job: app.job() of its id finds it on its own queue.
    for step in steps:
        job = live_app.job(step.id).info()
        assert (job.queue, job.priority, job.state) == (step.queue, step.priority, JobState.SUCCEEDED)
    assert live_app.job(steps[1].id).result(timeout=1) == 30


def test_a_group_returns_results_in_member_order_not_finish_order(live_app: TaskForge, gate: Gate) -> None:
    # The first member can only finish after the second one opened its gate.
    h = group(gated.s("first", gate.name), opener.s("second", gate.name)).delay()
    assert h.result(timeout=RESULT_TIMEOUT) == ["first", "second"]
    assert gate.order() == ["opener", "gated"]
    assert [s.task for s in h.info().steps] == [gated.name, opener.name]


def test_a_chord_gives_the_follow_up_the_list_of_member_results(live_app: TaskForge) -> None:
    h = chain(add.s(1, 1), group(mul.s(10), mul.s(100), ident.s()), total.s()).delay()
    assert h.result(timeout=RESULT_TIMEOUT) == 222
    steps = h.info().steps
    assert [s.task for s in steps] == [add.name, mul.name, mul.name, ident.name, total.name]
    assert [s.args for s in steps[1:4]] == [(2, 10), (2, 100), (2,)]
    assert steps[4].args == ([20, 200, 2],)


NESTINGS: dict[str, tuple[Callable[[], Chain | Group], Any, list[str]]] = {
    "chain in group": (
        lambda: group(chain(add.s(1, 2), mul.s(10)), chain(add.s(3, 4), mul.s(10))),
        [30, 70],
        [add.name, mul.name, add.name, mul.name],
    ),
    "group in group": (
        lambda: group(group(ident.s(1), ident.s(2)), ident.s(3)),
        [[1, 2], 3],
        [ident.name] * 3,
    ),
    "chain ending in a group": (
        lambda: chain(add.s(1, 2), group(mul.s(2), mul.s(3))),
        [6, 9],
        [add.name, mul.name, mul.name],
    ),
    "group in chain in group in chain": (
        lambda: chain(ident.s(1), group(chain(mul.s(2), group(mul.s(3), mul.s(5))), mul.s(7))),
        [[6, 10], 7],
        [ident.name, mul.name, mul.name, mul.name, mul.name],
    ),
    "chain of chains": (
        lambda: chain(chain(add.s(1, 1), mul.s(3)), chain(add.s(1), group(ident.s(), mul.s(2))), total.s()),
        21,
        [add.name, mul.name, add.name, ident.name, mul.name, total.name],
    ),
}


@pytest.mark.parametrize("name", list(NESTINGS))
def test_nested_workflows(live_app: TaskForge, name: str) -> None:
    build, expected, tasks = NESTINGS[name]
    h = build().delay()
    assert h.result(timeout=RESULT_TIMEOUT) == expected
    # Steps in workflow order (depth-first), groups flattened.
    assert [s.task for s in h.info().steps] == tasks


def test_another_app_object_follows_the_workflow_by_id(live_app: TaskForge, module_redis: str) -> None:
    h = chain(add.s(2, 3), mul.s(4)).delay()
    elsewhere = TaskForge("elsewhere", broker=module_redis)  # knows none of the tasks
    try:
        other = elsewhere.workflow(h.id)
        assert other == h
        assert other.result(timeout=RESULT_TIMEOUT) == 20
        assert other.status() is WorkflowState.SUCCEEDED
        assert [s.id for s in other.info().steps] == [s.id for s in h.info().steps]
        assert other.cancel() is False
        with pytest.raises(WorkflowNotFound, match="no workflow nope"):
            elsewhere.workflow("nope").status()
        missing = elsewhere.workflow("0" * 32)
        for call in (missing.info, missing.cancel, lambda: missing.result(timeout=1)):
            with pytest.raises(WorkflowNotFound):
                call()
        with pytest.raises(ConfigurationError):
            elsewhere.workflow("")
    finally:
        elsewhere.broker.client.close()


def test_result_times_out_while_a_step_runs_and_unsent_steps_are_listed(live_app: TaskForge, gate: Gate) -> None:
    h = chain(gated.s(1, gate.name), ident.s(), ident.s()).delay()
    gate.wait_running()
    with pytest.raises(TimeoutError, match=h.id):
        h.result(timeout=0.2)
    assert h.status() is WorkflowState.RUNNING
    info = h.info()
    assert info.finished_at is None
    assert [s.state for s in info.steps] == [JobState.RUNNING, JobState.PENDING, JobState.PENDING]
    assert [s.id for s in info.steps] == [f"{h.id}.{i}" for i in range(3)]
    assert info.steps[1].created_at is None  # not sent yet, listed all the same
    assert h.id in live_app.broker.ledger.workflow_ids("running")
    gate.open()
    assert h.result(timeout=RESULT_TIMEOUT) == 1
    assert [s.state for s in h.info().steps] == [JobState.SUCCEEDED] * 3
