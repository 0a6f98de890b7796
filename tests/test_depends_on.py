"""``apply_async(..., depends_on=...)``: a job that waits for jobs that already exist (RQ's ``depends_on``)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from taskforge import JobState, TaskForge
from taskforge.broker import dependencies
from taskforge.broker.keys import QueueKeys
from taskforge.depending import Parents
from taskforge.errors import ConfigurationError, JobNotFound

RAN: list[str] = []


def make_tasks(app: TaskForge) -> tuple[Any, Any, Any]:
    @app.task(max_attempts=1)
    def step(name: str) -> str:
        RAN.append(name)
        return name

    @app.task(max_attempts=1)
    def boom() -> None:
        raise ValueError("boom")

    @app.task(queue="other", max_attempts=1)
    def elsewhere(name: str) -> str:
        RAN.append(name)
        return name

    return step, boom, elsewhere


@pytest.fixture(autouse=True)
def _clear() -> None:
    RAN.clear()


def test_waits_until_its_parents_succeed(app: TaskForge) -> None:
    step, _, _ = make_tasks(app)
    a = step.delay("a")
    b = step.delay("b")
    child = step.apply_async(("child",), depends_on=[a, b.id])
    assert child.status() == JobState.DEFERRED
    assert [job.id for job in app.find_jobs(state="deferred").jobs] == [child.id]  # search knows the state
    app.drain()
    assert RAN.index("child") > max(RAN.index("a"), RAN.index("b"))
    assert child.status() == JobState.SUCCEEDED


def test_a_parent_that_dies_cancels_it(app: TaskForge) -> None:
    step, boom, _ = make_tasks(app)
    bad = boom.delay()
    child = step.apply_async(("child",), depends_on=bad)
    app.drain()
    assert "child" not in RAN
    assert child.status() == JobState.CANCELLED
    assert bad.id in (child.info().error or "")


def test_allow_failure_runs_it_anyway(app: TaskForge) -> None:
    step, boom, _ = make_tasks(app)
    step.apply_async(("child",), depends_on=boom.delay(), allow_failure=True)
    app.drain()
    assert RAN == ["child"]


def test_a_parent_in_another_queue(app: TaskForge) -> None:
    step, _, elsewhere = make_tasks(app)
    parent = elsewhere.delay("parent")
    child = step.apply_async(("child",), depends_on=parent)
    app.drain()
    assert RAN == ["parent", "child"]
    assert child.status() == JobState.SUCCEEDED


def test_an_unknown_parent_is_an_error_at_the_call(app: TaskForge) -> None:
    step, _, _ = make_tasks(app)
    with pytest.raises(JobNotFound):
        step.apply_async(("child",), depends_on="no-such-job")
    app.drain()
    assert RAN == []


def test_a_parent_already_succeeded_runs_it_at_once(app: TaskForge) -> None:
    step, _, _ = make_tasks(app)
    parent = step.delay("parent")
    app.drain()
    child = step.apply_async(("child",), depends_on=parent)
    assert child.status() == JobState.PENDING
    app.drain()
    assert RAN == ["parent", "child"]


def test_the_same_report_twice_runs_it_once(app: TaskForge) -> None:
    step, _, _ = make_tasks(app)
    a, b = step.delay("a"), step.delay("b")
    child = step.apply_async(("child",), depends_on=[a, b])
    broker = app.broker
    twice = dependencies.report("default", child.id, a.id, "succeeded", broker.settings.retention_ms)
    assert broker.drive(twice) == "deferred"
    again = dependencies.report("default", child.id, a.id, "succeeded", broker.settings.retention_ms)
    assert broker.drive(again) == "deferred"  # a counts once: b still to come
    app.drain()
    assert RAN.count("child") == 1


def test_a_waiting_job_can_be_cancelled(app: TaskForge) -> None:
    step, _, _ = make_tasks(app)
    parent = step.delay("parent")
    child = step.apply_async(("child",), depends_on=parent)
    assert child.cancel()
    app.drain()
    assert RAN == ["parent"] and child.status() == JobState.CANCELLED


def test_countdown_with_depends_on_is_refused(app: TaskForge) -> None:
    step, _, _ = make_tasks(app)
    with pytest.raises(ConfigurationError, match="depends_on"):
        step.apply_async(("child",), countdown=5, depends_on=step.delay("parent"))


def test_async_apply_waits_too(app: TaskForge) -> None:
    step, _, _ = make_tasks(app)
    parent = step.delay("parent")

    async def send() -> Any:
        return await step.aapply_async(("child",), depends_on=parent)

    child = asyncio.run(send())
    assert child.status() == JobState.DEFERRED
    app.drain()
    assert RAN == ["parent", "child"]


def test_a_job_its_producer_left_parked_is_held_by_the_audit(app: TaskForge) -> None:
    step, _, _ = make_tasks(app)
    parent = step.delay("parent")
    parents = Parents.of(step.name, parent, False, {})
    found = app.broker.drive(parents.located(app.queues()))
    [job_id] = step._store([parents.job(step, ("child",), {}, found)], resend=False)  # then the producer died
    retention = app.broker.settings.retention_ms
    assert app.broker.drive(dependencies.audit(["default"], retention)) == 1
    assert app.job(job_id).status() == JobState.DEFERRED
    app.drain()
    assert RAN == ["parent", "child"]


def test_a_lost_listing_is_listed_again_by_the_audit(app: TaskForge) -> None:
    step, _, _ = make_tasks(app)
    parent = step.delay("parent")
    child = step.apply_async(("child",), depends_on=parent)
    q = QueueKeys("default")
    client = app.broker.client
    client.delete(q.prefix + "dependents:" + parent.id)  # a failover lost the parent's listing
    client.hdel(q.job(parent.id), "dependents")
    app.drain()
    assert RAN == ["parent"] and child.status() == JobState.DEFERRED
    client.zadd(q.prefix + "deferred", {child.id: 0})  # deferred long ago
    assert app.broker.drive(dependencies.audit(["default"], app.broker.settings.retention_ms)) == 1
    app.drain()
    assert RAN == ["parent", "child"]


def test_a_waiting_job_is_counted_by_status_metrics_and_max_size(broker_url: str) -> None:
    """A deferred job is unfinished: ``taskforge status`` and the queue gauge show it, and max_size bounds it."""
    from taskforge import status as tf_status
    from taskforge.errors import QueueFull
    from taskforge.metrics import QUEUE_STATES

    bounded = TaskForge("bounded", broker=broker_url, max_size=2)
    step, _, _ = make_tasks(bounded)
    parent = step.delay("parent")
    step.apply_async(("child",), depends_on=parent)
    queue = tf_status.queue_status(bounded, "default")
    assert (queue.deferred, queue.pending) == (1, 1)
    assert "deferred" in QUEUE_STATES and queue.to_dict()["deferred"] == 1  # the gauge reads to_dict()
    probed = tf_status.queue_statuses(bounded, ["default"], set())  # a page of queues probes first
    assert probed[0].deferred == 1
    with pytest.raises(QueueFull):
        step.delay("third")  # the parent and the waiting child fill it
