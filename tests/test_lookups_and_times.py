"""RQ's habits: a lookup of an unknown id fails at once (like `Job.fetch`), a run knows its enqueue and start."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone

import pytest

from taskforge import JobNotFound, JobState, TaskForge, TaskforgeError, current_job


def test_a_lookup_of_an_unknown_id_raises_job_not_found(app: TaskForge) -> None:
    @app.task
    def add(a: int, b: int) -> int:
        return a + b

    with pytest.raises(JobNotFound, match="no-such-id") as caught:
        app.job("no-such-id")
    assert isinstance(caught.value, TaskforgeError) and isinstance(caught.value, LookupError)
    handle = add.with_options(queue="elsewhere").delay(1, 2)
    found = app.job(handle.id)  # a queue the app does not name is searched too
    assert found == handle and found.queue == "elsewhere" and found.status() is JobState.PENDING


def test_in_an_event_loop_the_lookup_waits_for_the_first_awaited_call(app: TaskForge) -> None:
    @app.task
    def add(a: int, b: int) -> int:
        return a + b

    async def lookups() -> None:
        handle = await add.adelay(1, 2)
        assert await app.job(handle.id).astatus() is JobState.PENDING
        missing = app.job("no-such-id")  # no sync Redis call inside the loop
        with pytest.raises(JobNotFound):
            await missing.ainfo()
        await app.aclose()

    asyncio.run(lookups())


def test_current_job_knows_when_it_was_enqueued_and_started(app: TaskForge) -> None:
    @app.task
    def times() -> tuple[datetime, datetime]:
        job = current_job()
        return job.enqueued_at, job.started_at

    before = datetime.now(timezone.utc) - timedelta(seconds=1)  # Redis's clock stamps enqueues
    handle = times.delay()
    app.drain()
    enqueued_at, started_at = handle.result(timeout=1)
    after = datetime.now(timezone.utc) + timedelta(seconds=1)
    assert enqueued_at.tzinfo is not None and started_at.tzinfo is not None
    assert before <= enqueued_at <= started_at <= after
    assert enqueued_at == handle.info().created_at
