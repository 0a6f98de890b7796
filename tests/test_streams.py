"""Job streams (docs/howto/durable-steps.md): ``current_job().stream`` and ``JobHandle.stream`` / ``astream``.

Both backends, through ``app.drain()`` (the worker's own run path, here in a
thread beside the reader) and the scripts directly; ``tests/worker/test_steps.py``
reads a stream from another process while real workers run the job.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from taskforge import BrokerUnavailable, JobNotFound, JobState, LeaseLost, TaskForge, current_job
from taskforge.broker import job_plans
from taskforge.broker.keys import QueueKeys
from taskforge.errors import CorruptJob
from taskforge.testing import set_eager
from tests.conftest import inspector
from tests.test_durable_steps import claimed, running_as


def test_a_reader_gets_every_item_in_order_then_stops(app: TaskForge) -> None:
    @app.task
    def answer(words: list[str]) -> int:
        for word in words:
            current_job().stream({"token": word})
        return len(words)

    handle = answer.delay(["never", "redo", "a", "step"])
    app.drain()
    assert list(handle.stream(timeout=5)) == [{"token": w} for w in ["never", "redo", "a", "step"]]
    assert list(handle.stream(timeout=5)) == [{"token": w} for w in ["never", "redo", "a", "step"]]  # again: all
    info = handle.info()
    assert info.stream_length == 4 and info.result == 4


def test_a_live_reader_sees_items_as_they_are_written(app: TaskForge) -> None:
    go = threading.Event()
    seen: list[tuple[int, float]] = []

    @app.task
    def slow_answer() -> None:
        current_job().stream(0)
        assert go.wait(10)  # the reader has item 0 while the job runs
        for n in range(1, 300):  # more than one XREAD batch
            current_job().stream(n)
            if n % 100 == 99:
                time.sleep(0.2)  # the reader waits for the next ones

    handle = slow_answer.delay()
    runner = threading.Thread(target=app.drain)
    runner.start()
    try:
        for item in handle.stream(timeout=10):
            if not seen:
                go.set()
            seen.append((item, time.monotonic()))
    finally:
        go.set()
        runner.join(10)
    assert [item for item, _ in seen] == list(range(300))
    assert handle.status() is JobState.SUCCEEDED


def test_no_item_and_a_finished_job_ends_the_stream_at_once(app: TaskForge) -> None:
    @app.task
    def silent() -> int:
        return 1

    handle = silent.delay()
    app.drain()
    assert list(handle.stream(timeout=5)) == [] and handle.info().stream_length == 0


def test_timeout_bounds_the_wait_for_the_next_item(app: TaskForge) -> None:
    @app.task
    def never_run() -> None: ...

    handle = never_run.delay()  # pending: nobody runs it
    started = time.monotonic()
    with pytest.raises(TimeoutError, match="streamed nothing new within 0.3 s"):
        list(handle.stream(timeout=0.3))
    assert time.monotonic() - started < 3


def test_a_dead_jobs_stream_just_stops(app: TaskForge) -> None:
    @app.task(max_attempts=2, backoff=0.01)
    def failing() -> None:
        current_job().stream(f"attempt {current_job().attempt}")
        raise RuntimeError("no")

    handle = failing.delay()
    app.drain(advance=60)
    # never deduplicated: each run streamed its own line
    assert list(handle.stream(timeout=5)) == ["attempt 1", "attempt 2"]
    assert handle.status() is JobState.DEAD


def test_an_item_streamed_inside_a_step_is_not_streamed_again(app: TaskForge) -> None:
    @app.task(max_attempts=2, backoff=0.01)
    def summarize() -> str:
        job = current_job()

        def first_part() -> str:
            job.stream("part 1")
            return "part 1"

        job.step("first", first_part)
        job.stream(f"outside, run {job.attempt}")
        if job.attempt == 1:
            raise RuntimeError("crash after the step")
        return "ok"

    handle = summarize.delay()
    app.drain(advance=60)
    assert list(handle.stream(timeout=5)) == ["part 1", "outside, run 1", "outside, run 2"]


def test_astream_in_an_async_task_and_an_async_reader(app: TaskForge) -> None:
    @app.task
    async def tokens(n: int) -> int:
        for i in range(n):
            current_job().stream(i)  # does not block: one quick Redis call
            await asyncio.sleep(0)
        return n

    handle = tokens.delay(5)
    app.drain()

    async def read() -> list[Any]:
        return [item async for item in handle.astream(timeout=5)]

    assert asyncio.run(read()) == [0, 1, 2, 3, 4]


def test_an_item_msgpack_cannot_carry_fails_the_run(app: TaskForge) -> None:
    @app.task(max_attempts=1)
    def unstorable() -> None:
        current_job().stream(object())

    handle = unstorable.delay()
    app.drain()
    info = handle.info()
    assert info.state is JobState.DEAD and info.stream_length == 0
    assert info.error_type == "taskforge.errors.SerializationError" and "stream" in (info.error or "")


def test_a_run_that_lost_its_claim_cannot_stream(app: TaskForge) -> None:
    handle, claim = claimed(app)
    with running_as(app, claim, token="a-token-no-longer-ours"), pytest.raises(LeaseLost, match="stream"):
        current_job().stream("from a zombie")
    assert handle.info().stream_length == 0
    assert app.broker.client.exists(QueueKeys("default").stream(handle.id)) == 0
    with running_as(app, claim):
        current_job().stream("from the holder")
    assert handle.info().stream_length == 1


def test_the_stream_lives_and_goes_with_the_record(app: TaskForge) -> None:
    @app.task(max_attempts=1)
    def streamed(fail: bool) -> None:
        current_job().stream("x")
        if fail:
            raise RuntimeError("dead")

    done, dead = streamed.delay(False), streamed.delay(True)
    app.drain()
    client, keys = inspector(app), QueueKeys("default")
    for handle in (done, dead):
        assert client.type(keys.stream(handle.id)) == b"stream"
        assert 0 < client.pttl(keys.stream(handle.id)) <= client.pttl(keys.job(handle.id)) + 1000
    assert dead.retry()  # back in line: the stream stops expiring with the record
    assert client.pttl(keys.stream(dead.id)) == -1
    assert app.broker.cleanup.purge("default", "pending") == 1
    assert client.exists(keys.stream(dead.id), keys.job(dead.id)) == 0


def test_a_stream_of_the_wrong_type_is_a_clear_error(app: TaskForge) -> None:
    @app.task(max_attempts=1)
    def streams_once() -> None:
        current_job().stream("x")

    handle = streams_once.delay()
    app.broker.client.set(QueueKeys("default").stream(handle.id), "junk")
    app.drain()
    info = handle.info()
    assert info.state is JobState.DEAD and info.error_type == "taskforge.errors.CorruptJob"
    assert "is not a stream" in (info.error or "")
    if app.broker.url.startswith("memory:"):
        return  # fakeredis answers XREAD on a string with an AttributeError of its own, not WRONGTYPE
    with pytest.raises(CorruptJob, match="wrong type"):
        list(handle.stream(timeout=5))


def test_reading_the_stream_of_an_unknown_job(app: TaskForge) -> None:
    with pytest.raises(JobNotFound):
        list(app.job("0" * 32).stream(timeout=1))


def test_a_reader_rides_out_redis_going_away_without_missing_or_repeating(
    app: TaskForge, monkeypatch: pytest.MonkeyPatch
) -> None:
    @app.task
    def counted(n: int) -> None:
        for i in range(n):
            current_job().stream(i)

    handle = counted.delay(450)
    app.drain()
    real = job_plans.read_stream  # the plan every stream read runs, sync or awaited
    calls = {"n": 0}

    def flaky_read(*args: Any) -> Any:
        calls["n"] += 1
        if calls["n"] in (2, 3, 5):  # away between batches, twice in a row once
            raise BrokerUnavailable("cannot reach the broker (test)")
        return real(*args)

    monkeypatch.setattr(job_plans, "read_stream", flaky_read)
    assert list(handle.stream(timeout=10)) == list(range(450))
    assert calls["n"] >= 6


def test_a_reader_gives_up_once_redis_stays_away(app: TaskForge, monkeypatch: pytest.MonkeyPatch) -> None:
    @app.task
    def never_run() -> None: ...

    handle = never_run.delay()

    def down(*args: Any) -> Any:
        raise BrokerUnavailable("cannot reach the broker (test)")

    monkeypatch.setattr(job_plans, "read_stream", down)
    with pytest.raises(BrokerUnavailable):
        list(handle.stream(timeout=0.5))


def test_a_workflow_step_may_use_steps_a_sleep_and_a_stream(app: TaskForge) -> None:
    from taskforge import chain

    calls: list[str] = []

    @app.task(max_attempts=2, backoff=0.01)
    def research(topic: str) -> str:
        job = current_job()
        found = job.step("search", lambda: calls.append("search") or f"notes on {topic}")
        job.sleep(30)  # a durable sleep inside a workflow step: the workflow waits for it
        job.stream(found)
        return found

    @app.task
    def publish(notes: str) -> str:
        return notes.upper()

    flow = chain(research.s("redis"), publish.s()).delay()
    app.drain()
    assert flow.status().value == "running"  # its first step sleeps, scheduled
    app.drain(advance=60)
    assert flow.result(timeout=5) == "NOTES ON REDIS" and calls == ["search"]
    [first, _] = flow.info().steps
    step = app.job(first.id)
    assert step.info().steps == {"search": "notes on redis"} and list(step.stream(timeout=5)) == ["notes on redis"]


def test_in_eager_mode_a_sleeping_job_waits_for_drain_advance(app: TaskForge) -> None:
    @app.task
    def later() -> int:
        current_job().sleep(3600)
        current_job().stream("awake")
        return 1

    set_eager(app, True)
    try:
        handle = later.delay()  # ran at once, up to its sleep
        assert handle.status() is JobState.SCHEDULED and handle.info().attempts == 0
        app.drain(advance=3600)
    finally:
        set_eager(app, False)
    assert handle.result(timeout=5) == 1 and list(handle.stream(timeout=5)) == ["awake"]


def test_a_stream_call_sent_again_after_a_lost_reply_writes_its_item_once(app: TaskForge) -> None:
    """redis-py sends a command again after a connection error: the item it may already have written counts once."""
    handle, claim = claimed(app)
    steps = app.broker.steps
    assert steps.append("default", claim.id, claim.token, b"\xa1a", 1)
    assert steps.append("default", claim.id, claim.token, b"\xa1a", 1)  # the same call again
    assert steps.append("default", claim.id, claim.token, b"\xa1b", 2)
    assert inspector(app).xlen(QueueKeys("default").stream(handle.id)) == 2
    assert handle.info().stream_length == 2
