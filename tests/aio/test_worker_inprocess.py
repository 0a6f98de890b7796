"""Async tasks without a worker: ``app.drain()``, ``await app.adrain()``, plain calls, hooks and middleware.

Run on ``memory://`` and on real Redis, as the rest of the testing kit is.
"""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

from taskforge import JobState, Retry, TaskForge, current_job


def make_app(url: str) -> tuple[TaskForge, list[Any]]:
    app = TaskForge("aiodrain", broker=url)
    seen: list[Any] = []

    @app.task(name="fetch")
    async def fetch(x: int) -> list[Any]:
        job = current_job()
        await asyncio.sleep(0.01)
        return [x * 2, job.id, current_job().attempt]

    @app.task(name="plain")
    def plain(x: int) -> int:
        return x + 1

    @app.task(name="flaky", max_attempts=2, backoff=0)
    async def flaky(key: str) -> str:
        if current_job().attempt == 1:
            raise Retry(after=0)
        return key

    @app.task(name="broken", max_attempts=1)
    async def broken() -> None:
        await asyncio.sleep(0)
        raise ValueError("no luck")

    @app.on("job_succeeded")
    def succeeded(event: Any) -> None:
        seen.append(("succeeded", event.job.task, event.result))

    return app, seen


def test_calling_an_async_task_plainly_returns_its_coroutine(app: TaskForge) -> None:
    @app.task
    async def fetch(x: int) -> int:
        return x

    coro = fetch(3)
    assert inspect.iscoroutine(coro)
    assert asyncio.run(coro) == 3


def test_drain_runs_async_tasks_with_their_own_job(broker_url: str) -> None:
    app, seen = make_app(broker_url)
    tasks = app.tasks
    handles = [tasks["fetch"].delay(i) for i in range(3)]
    sync = tasks["plain"].delay(1)
    ran = app.drain()
    assert len(ran) == 4 and {info.state for info in ran} == {JobState.SUCCEEDED}
    assert [h.result(timeout=1) for h in handles] == [[2 * i, h.id, 1] for i, h in enumerate(handles)]
    assert sync.result(timeout=1) == 2
    assert sorted(name for _, name, _ in seen) == ["fetch"] * 3 + ["plain"]


def test_drain_retries_and_buries_async_tasks(broker_url: str) -> None:
    app, _ = make_app(broker_url)
    flaky = app.tasks["flaky"].delay("k")
    broken = app.tasks["broken"].delay()
    app.drain(advance=1)
    assert flaky.result(timeout=1) == "k" and flaky.info().attempts == 2
    assert broken.status() is JobState.DEAD
    info = broken.info()
    assert info.error == "ValueError: no luck" and "raise ValueError" in (info.traceback or "")


def test_adrain_runs_async_tasks_inside_a_running_loop(broker_url: str) -> None:
    app, _ = make_app(broker_url)
    fetch = app.tasks["fetch"]
    plain = app.tasks["plain"]

    async def main() -> tuple[list[Any], int]:
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.001)

        handles = [fetch.delay(i) for i in range(5)] + [plain.delay(9)]
        beat = asyncio.ensure_future(ticker())
        try:
            ran = await app.adrain()
        finally:
            beat.cancel()
        assert len(ran) == 6
        return [h.result(timeout=1) for h in handles], ticks

    results, ticks = asyncio.run(main())
    assert results[:5] == [[2 * i, r[1], 1] for i, r in enumerate(results[:5])] and results[5] == 10
    assert ticks > 0  # the caller's loop kept running while the jobs did


def test_drain_from_inside_a_running_loop_still_runs_async_tasks(broker_url: str) -> None:
    app, _ = make_app(broker_url)
    fetch = app.tasks["fetch"]

    async def main() -> Any:
        handle = fetch.delay(21)
        app.drain()  # blocks this loop, as drain() does; the job runs on a loop of its own
        return handle.result(timeout=1)[0]

    assert asyncio.run(main()) == 42


def test_middleware_wraps_async_tasks_plain_and_async(app: TaskForge) -> None:
    calls: list[str] = []

    @app.middleware
    def plain(job: Any, call_next: Any) -> Any:
        calls.append("plain")
        return call_next()

    @app.middleware
    async def timing(job: Any, call_next: Any) -> Any:
        calls.append("async before")
        value = await call_next()
        calls.append("async after")
        return value * 10

    @app.task
    async def fetch(x: int) -> int:
        calls.append("task")
        return x

    @app.task
    def sync(x: int) -> int:
        calls.append("sync task")
        return x

    async_handle, sync_handle = fetch.delay(4), sync.delay(5)
    app.drain()
    assert async_handle.result(timeout=1) == 40
    assert sync_handle.result(timeout=1) == 5  # an async middleware does not wrap a sync task
    assert calls == ["plain", "async before", "task", "async after", "plain", "sync task"]
