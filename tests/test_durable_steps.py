"""Durable steps (docs/howto/durable-steps.md): a finished step is kept with its job and never runs again.

Both backends, through ``app.drain()`` (the worker's own run path) and the
scripts directly; the worker test (``tests/worker/test_steps.py``) kills a
child inside a step.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from taskforge import JobState, LeaseLost, TaskForge, current_job
from taskforge.broker.keys import QueueKeys
from taskforge.context import enter, leave
from tests.conftest import inspector


def test_a_retried_run_gets_a_finished_step_back_without_running_it(app: TaskForge) -> None:
    calls: list[str] = []

    def fetch(user: int) -> dict[str, Any]:
        calls.append("fetch")
        return {"user": user, "name": "Ada"}

    @app.task(max_attempts=3, backoff=0.01)
    def onboard(user: int) -> str:
        job = current_job()
        profile = job.step("fetch", fetch, user)
        if job.attempt == 1:
            raise RuntimeError("the mail server is down")
        sent = job.step("welcome", lambda p: f"welcome {p['name']}", profile)
        return f"{sent} ({job.attempt})"

    handle = onboard.delay(7)
    app.drain(advance=60)
    info = handle.info()
    assert info.state is JobState.SUCCEEDED and handle.result() == "welcome Ada (2)"
    assert calls == ["fetch"]  # once: the second run got it back
    assert info.steps == {"fetch": {"user": 7, "name": "Ada"}, "welcome": "welcome Ada"}


def test_a_job_without_steps_has_none(app: TaskForge) -> None:
    @app.task
    def plain() -> int:
        return 1

    handle = plain.delay()
    app.drain()
    assert handle.info().steps == {}


def test_a_step_that_raises_stores_nothing(app: TaskForge) -> None:
    runs: list[int] = []

    def flaky() -> str:
        runs.append(1)
        if len(runs) == 1:
            raise ValueError("not yet")
        return "done"

    @app.task(max_attempts=2, backoff=0.01)
    def job_with_a_flaky_step() -> str:
        return current_job().step("flaky", flaky)

    handle = job_with_a_flaky_step.delay()
    app.drain(advance=60)
    assert handle.result() == "done" and len(runs) == 2
    assert handle.info().steps == {"flaky": "done"}


@pytest.mark.parametrize(
    ("names", "message"),
    [
        (["twice", "twice"], "step 'twice' was already reached in this run"),
        ([""], "a step's name is a non-empty string"),
        ([5], "a step's name is a non-empty string"),
    ],
)
def test_bad_step_names_fail_the_run_before_the_step_runs(app: TaskForge, names: list[Any], message: str) -> None:
    ran: list[Any] = []

    @app.task(max_attempts=1)
    def named() -> None:
        for name in names:
            current_job().step(name, ran.append, name)

    handle = named.delay()
    app.drain()
    info = handle.info()
    assert info.state is JobState.DEAD and message in (info.error or "")
    assert ran == names[:-1]  # the step with the bad name never ran


def test_a_result_msgpack_cannot_carry_names_the_step(app: TaskForge) -> None:
    @app.task(max_attempts=1)
    def unstorable() -> None:
        current_job().step("socket", object)

    handle = unstorable.delay()
    app.drain()
    info = handle.info()
    assert info.state is JobState.DEAD
    assert info.error_type == "taskforge.errors.SerializationError" and "step 'socket'" in (info.error or "")
    assert info.steps == {}


@contextmanager
def running_as(app: TaskForge, claim: Any, token: str | None = None) -> Iterator[None]:
    """Inside a run of ``claim``: with ``token``, as a run whose lease ran out and was claimed again sees it."""
    current = enter(replace(claim, token=token) if token else claim, app.broker.claims, app.broker.steps)
    try:
        yield
    finally:
        leave(current)


def claimed(app: TaskForge) -> tuple[Any, Any]:
    """A job of a do-nothing task, claimed: (its handle, the claim)."""

    @app.task
    def long_job() -> None: ...

    handle = long_job.delay()
    return handle, app.broker.claims.dequeue("default", 60_000)[0][0]


def test_a_run_that_lost_its_claim_cannot_store_a_step(app: TaskForge) -> None:
    handle, claim = claimed(app)
    with running_as(app, claim, token="a-token-no-longer-ours"), pytest.raises(LeaseLost, match="step 'charge'"):
        current_job().step("charge", lambda: "charged")
    assert handle.info().steps == {}
    with running_as(app, claim):
        assert current_job().step("charge", lambda: "charged") == "charged"
    assert handle.info().steps == {"charge": "charged"}


def test_astep_awaits_an_async_step_and_replays_it(app: TaskForge) -> None:
    calls: list[int] = []

    async def fetch(n: int) -> int:
        await asyncio.sleep(0)
        calls.append(n)
        return n * 2

    @app.task(max_attempts=2, backoff=0.01)
    async def pipeline(n: int) -> int:
        job = current_job()
        doubled = await job.astep("double", fetch, n)
        plus = await job.astep("plus", lambda x: x + 1, doubled)  # a plain function too
        if job.attempt == 1:
            raise RuntimeError("once")
        return plus

    handle = pipeline.delay(20)
    app.drain(advance=60)
    assert handle.result() == 41 and calls == [20]
    assert handle.info().steps == {"double": 40, "plus": 41}


def test_step_results_go_with_the_record(app: TaskForge) -> None:
    @app.task
    def stepped() -> str:
        return current_job().step("only", lambda: "x")

    handle = stepped.delay()
    app.drain()
    key = QueueKeys("default").job(handle.id)
    assert app.broker.client.hget(key, "step:only") is not None
    assert inspector(app).pttl(key) > 0  # expires with the finished record


def test_sleep_ends_the_run_and_resumes_the_job_with_its_steps_and_attempts(app: TaskForge) -> None:
    calls: list[str] = []

    @app.task(max_attempts=1)
    def reminder(user: int) -> str:
        job = current_job()
        first = job.step("welcome", lambda: calls.append("welcome") or "sent")
        job.sleep(timedelta(hours=1))
        second = job.step("follow-up", lambda: calls.append("follow-up") or "followed")
        return f"{first}, {second}"

    handle = reminder.delay(7)
    app.drain()
    info = handle.info()
    assert info.state is JobState.SCHEDULED and info.attempts == 0  # no attempt used
    assert info.steps == {"welcome": "sent"} and calls == ["welcome"]
    assert info.scheduled_at is not None
    app.drain(advance=3600)
    assert handle.result() == "sent, followed"
    assert calls == ["welcome", "follow-up"] and handle.info().attempts == 1


def test_sleeps_are_told_apart_by_order_and_sleep_until_takes_a_naive_utc_time(app: TaskForge) -> None:
    @app.task
    def twice() -> str:
        job = current_job()
        job.sleep(10)
        job.sleep_until(datetime.now(timezone.utc).replace(tzinfo=None) + timedelta(seconds=20))
        return "awake"

    handle = twice.delay()
    app.drain()
    assert handle.status() is JobState.SCHEDULED
    app.drain(advance=11)
    assert handle.status() is JobState.SCHEDULED  # the first sleep is past, the second begins
    app.drain(advance=60)
    assert handle.result() == "awake"


def test_asleep_in_an_async_task(app: TaskForge) -> None:
    @app.task
    async def later() -> str:
        await current_job().asleep(5)
        return "done"

    handle = later.delay()
    app.drain()
    assert handle.status() is JobState.SCHEDULED
    app.drain(advance=10)
    assert handle.result() == "done"


@pytest.mark.parametrize("duration", [-1, float("nan"), "soon", True])
def test_a_bad_sleep_fails_the_run(app: TaskForge, duration: Any) -> None:
    @app.task(max_attempts=1)
    def sleepy() -> None:
        current_job().sleep(duration)

    handle = sleepy.delay()
    app.drain()
    info = handle.info()
    assert info.state is JobState.DEAD and "sleep(" in (info.error or "")


def test_a_run_that_lost_its_claim_cannot_sleep(app: TaskForge) -> None:
    handle, claim = claimed(app)
    with running_as(app, claim, token="a-token-no-longer-ours"), pytest.raises(LeaseLost, match="sleep"):
        current_job().sleep(60)
    assert handle.status() is JobState.RUNNING
