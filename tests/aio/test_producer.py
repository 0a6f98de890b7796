"""The awaitable producer API on memory:// and real Redis: every a-method, its errors, and its pools.

Each test runs its coroutine with ``asyncio.run`` and closes the loop's
connections at the end (``app.aclose()``). Jobs are run by ``app.drain()``
from inside the coroutine: on ``memory://`` that proves the async client
and the sync one share one in-process server.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta, timezone
from typing import Any, TypeVar

import pytest

from taskforge import JobState, QueueFull, SerializationError, TaskFailed, TaskForge
from taskforge.broker.keys import QueueKeys
from taskforge.errors import ConfigurationError, CorruptQueue, JobNotFound

T = TypeVar("T")


def run(app: TaskForge, main: Callable[[], Awaitable[T]]) -> T:
    """Run ``main()`` on a fresh loop, closing the app's connections of that loop afterwards."""

    async def wrapped() -> T:
        try:
            return await main()
        finally:
            await app.aclose()

    return asyncio.run(wrapped())


def define(app: TaskForge) -> Any:
    @app.task(name="aio.add")
    def add(a: int, b: int = 0) -> int:
        return a + b

    @app.task(name="aio.boom", max_attempts=1)
    def boom() -> None:
        raise ValueError("boom")

    return add, boom


def test_adelay_is_stored_run_by_drain_and_awaited(app: TaskForge) -> None:
    add, _ = define(app)

    async def main() -> None:
        h = await add.adelay(2, b=3)
        assert await h.astatus() is JobState.PENDING
        assert (await h.ainfo()).args == (2,)
        [ran] = app.drain()  # the sync side sees the job the async side stored
        assert ran.id == h.id
        assert await h.aresult(timeout=5) == 5
        info = await h.ainfo()
        assert (info.state, info.result, info.kwargs) == (JobState.SUCCEEDED, 5, {"b": 3})
        assert await h.astatus() is JobState.SUCCEEDED

    run(app, main)


def test_sync_and_async_handles_see_the_same_jobs(app: TaskForge) -> None:
    add, _ = define(app)

    async def main() -> None:
        sync_made = add.delay(1, 1)
        async_made = await add.adelay(2, 2)
        app.drain()
        assert await sync_made.aresult(timeout=5) == 2
        assert async_made.result(timeout=5) == 4
        assert await app.job(async_made.id).aresult(timeout=5) == 4  # a bare id: its queue is looked up

    run(app, main)


def test_aapply_at_and_aapply_in_schedule(app: TaskForge) -> None:
    add, _ = define(app)

    async def main() -> None:
        later = await add.aapply_in(timedelta(hours=1), 1)
        at = await add.aapply_at(datetime.now(timezone.utc) + timedelta(hours=2), 2)
        past = await add.aapply_at(datetime(2000, 1, 1), 3)  # naive: UTC; past: now
        states = [await h.astatus() for h in (later, at, past)]
        assert states == [JobState.SCHEDULED, JobState.SCHEDULED, JobState.PENDING]
        assert [j.id for j in app.drain()] == [past.id]
        assert {j.id for j in app.drain(advance=timedelta(hours=3))} == {later.id, at.id}
        assert [await h.aresult(timeout=5) for h in (later, at, past)] == [1, 2, 3]

    run(app, main)


def test_adelay_many_stores_all_or_nothing(app: TaskForge) -> None:
    add, _ = define(app)

    async def main() -> None:
        handles = await add.adelay_many([(1, 2), {"a": 5}, (7,)])
        assert len({h.id for h in handles}) == 3
        assert await add.adelay_many([]) == []
        with pytest.raises(SerializationError, match="call #1"):
            await add.adelay_many([(1,), (object(),)])
        with pytest.raises(ConfigurationError, match="call #0"):
            await add.adelay_many([[1, 2]])  # type: ignore[list-item]
        assert len(app.drain()) == 3  # the refused batches stored nothing
        assert [await h.aresult(timeout=5) for h in handles] == [3, 5, 7]

    run(app, main)


def test_asend_queues_by_name(app: TaskForge) -> None:
    define(app)

    async def main() -> None:
        h = await app.asend("aio.add", 4, b=4)
        stranger = await app.asend("elsewhere.unknown", 1)
        assert (await stranger.ainfo()).task == "elsewhere.unknown"
        app.drain()
        assert await h.aresult(timeout=5) == 8
        with pytest.raises(TaskFailed):
            await stranger.aresult(timeout=5)  # no worker knows it: dead-lettered

    run(app, main)


def test_acancel_and_aabort_stop_a_job_not_started(app: TaskForge) -> None:
    add, _ = define(app)

    async def main() -> None:
        first, second = await add.adelay(1), await add.adelay(2)
        assert await first.acancel() is True
        assert await first.acancel() is False  # too late: it is cancelled already
        assert await second.aabort() is True
        assert await second.aabort() is False
        assert app.drain() == []
        for h in (first, second):
            assert await h.astatus() is JobState.CANCELLED
            with pytest.raises(TaskFailed, match="cancelled"):
                await h.aresult(timeout=5)

    run(app, main)


def test_a_dead_job_raises_taskfailed(app: TaskForge) -> None:
    _, boom = define(app)

    async def main() -> None:
        h = await boom.adelay()
        app.drain()
        with pytest.raises(TaskFailed, match="boom") as failed:
            await h.aresult(timeout=5)
        assert failed.value.state == "dead"

    run(app, main)


def test_aresult_times_out(app: TaskForge) -> None:
    add, _ = define(app)

    async def main() -> None:
        h = await add.adelay(1)
        for timeout in (0.05, 0.4):  # below and above a server tick: a sleep, then a blocking pop
            started = time.monotonic()
            with pytest.raises(TimeoutError, match="did not finish"):
                await h.aresult(timeout=timeout)
            assert time.monotonic() - started < timeout + 2

    run(app, main)


def test_unknown_ids_raise_jobnotfound(app: TaskForge) -> None:
    add, _ = define(app)

    async def main() -> None:
        await add.adelay(1)  # the queue exists; the id does not
        for call in ("astatus", "ainfo", "acancel", "aabort", "aresult"):
            with pytest.raises(JobNotFound):
                await getattr(app.job("no-such-job"), call)()
        placed = add.with_options(queue="elsewhere")
        handle = await placed.adelay(1)
        with pytest.raises(JobNotFound):
            await type(handle)(app, "no-such-job", "elsewhere").acancel()

    run(app, main)


def test_bad_arguments_store_nothing(app: TaskForge) -> None:
    add, _ = define(app)

    async def main() -> None:
        with pytest.raises(TypeError, match="the job was not queued"):
            await add.adelay(1, 2, 3)  # type: ignore[call-arg]
        with pytest.raises(TypeError):
            await add.adelay(1, c=2)  # type: ignore[call-arg]
        with pytest.raises(SerializationError):
            await add.adelay(object())  # type: ignore[arg-type]
        with pytest.raises(ConfigurationError):
            await add.aapply_at("tomorrow", 1)  # type: ignore[arg-type]
        with pytest.raises(ConfigurationError):
            await add.aapply_in("soon", 1)  # type: ignore[arg-type]
        assert app.drain() == []

    run(app, main)


def test_a_full_queue_refuses(broker_url: str) -> None:
    app = TaskForge("tests", broker=broker_url, max_size=1)
    add, _ = define(app)

    async def main() -> None:
        await add.adelay(1)
        with pytest.raises(QueueFull, match="max_size is 1"):
            await add.adelay(2)
        with pytest.raises(QueueFull, match="2 jobs were not stored"):
            await add.adelay_many([(3,), (4,)])

    run(app, main)


def test_a_damaged_queue_is_named(app: TaskForge) -> None:
    add, _ = define(app)
    app.broker.client.set(QueueKeys("default").pending, "junk")

    async def main() -> None:
        with pytest.raises(CorruptQueue, match="pending is a string"):
            await add.adelay(1)

    run(app, main)


def test_one_pool_per_app_and_loop(broker_url: str) -> None:
    first, second = TaskForge("one", broker=broker_url), TaskForge("two", broker=broker_url)
    seen: list[object] = []

    async def main() -> None:
        assert first.async_broker() is first.async_broker()
        assert first.async_broker() is not second.async_broker()
        seen.append(first.async_broker())
        await second.aclose()

    run(first, main)
    run(first, main)
    assert seen[0] is not seen[1]  # a new loop, a new pool


def test_memory_follows_the_broker_the_testing_kit_swaps_in(taskforge_app: Callable[..., TaskForge]) -> None:
    app = taskforge_app()
    add, _ = define(app)

    async def main() -> None:
        h = await add.adelay(20, 22)
        [ran] = app.drain()
        assert ran.result == 42
        assert await h.aresult(timeout=5) == 42

    run(app, main)
    fresh = taskforge_app(app)  # a new memory:// server: the async side follows it

    async def empty() -> None:
        assert await fresh.async_broker().jobs.queues() == []

    run(fresh, empty)


def test_eager_mode_runs_an_adelay_before_it_returns(taskforge_app: Callable[..., TaskForge]) -> None:
    app = taskforge_app(eager=True)
    add, _ = define(app)

    async def main() -> None:
        h = await add.adelay(1, 2)
        assert await h.astatus() is JobState.SUCCEEDED

    run(app, main)


def test_a_cancelled_wait_leaves_the_pool_usable(app: TaskForge) -> None:
    add, _ = define(app)

    async def main() -> None:
        h = await add.adelay(1, 1)
        waiters = [asyncio.create_task(h.aresult(timeout=30)) for _ in range(5)]
        await asyncio.sleep(0.3)  # each is blocked in its pop now
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(waiters[0], 0.05)
        assert waiters[0].cancelled()
        app.drain()
        assert await asyncio.gather(*waiters[1:]) == [2] * 4  # the others were woken by the finish
        assert await h.astatus() is JobState.SUCCEEDED

    run(app, main)
