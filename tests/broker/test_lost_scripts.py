"""A server that loses its scripts between the load and the call: a restart at that moment.

NOSCRIPT right after a load means the script ran nowhere, so the call loads
and sends again (a few times); a server that keeps losing them is reported
as unavailable (``BrokerUnavailable``: callers back off and retry), never as
a bare redis-py error. Each server here is the test's own: SCRIPT FLUSH
empties a whole server.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from taskforge import BrokerUnavailable, JobState, TaskForge
from taskforge.broker.connection import SCRIPT_LOADS

pytestmark = pytest.mark.redis


def flushing_after_load(client: Any, times: int) -> list[int]:
    """Make ``client.script_load`` flush every script right after loading, ``times`` times: the
    server restarting between a load and the call it was for. Returns the count of loads made."""
    real = client.script_load
    loads = [0]

    def load(source: str) -> Any:
        loads[0] += 1
        sha = real(source)
        if loads[0] <= times:
            client.script_flush()
        return sha

    client.script_load = load
    return loads


@pytest.fixture
def app_job(own_redis_url: str) -> Iterator[tuple[TaskForge, Any]]:
    """An app on the test's own server and its one task; its connections closed at the end, while the
    server still answers (left to the garbage collector, a socket may go unclosed: a ResourceWarning)."""
    app = TaskForge("tests", broker=own_redis_url)

    @app.task
    def job() -> None:
        pass

    yield app, job
    app.broker.client.connection_pool.disconnect()


def test_a_call_goes_through_when_the_scripts_vanish_twice_in_a_row(app_job: tuple[TaskForge, Any]) -> None:
    app, job = app_job
    handle = job.delay()
    app.broker.client.script_flush()
    loads = flushing_after_load(app.broker.client, 2)
    claims, _ = app.broker.claims.dequeue("default", 30_000)  # a claim is sent once: no retry around it
    assert [c.id for c in claims] == [handle.id]
    assert loads[0] == 3  # two loads lost to the "restarts", the third one held
    assert handle.status() is JobState.RUNNING


def test_a_server_that_keeps_losing_its_scripts_is_reported_unavailable(app_job: tuple[TaskForge, Any]) -> None:
    app, job = app_job
    app.broker.client.script_flush()
    loads = flushing_after_load(app.broker.client, 1_000)
    with pytest.raises(BrokerUnavailable, match="cannot serve requests right now"):
        job.delay()
    assert loads[0] == 3 * SCRIPT_LOADS  # each of the enqueue's three tries (as through an outage) loads 3 times
    assert app.broker.inspection.counts("default")["pending"] == 0  # the script ran nowhere


def test_the_async_path_loads_again_too(app_job: tuple[TaskForge, Any]) -> None:
    app, job = app_job

    async def send(flushes: int) -> tuple[JobState | None, int]:
        client = app.async_broker().client
        await client.script_flush()
        real = client.script_load
        loads = [0]

        async def load(source: str) -> Any:
            loads[0] += 1
            sha = await real(source)
            if loads[0] <= flushes:
                await client.script_flush()
            return sha

        client.script_load = load
        try:
            handle = await job.adelay()
        except BrokerUnavailable:
            return None, loads[0]
        finally:
            await app.aclose()  # its connections belong to this event loop: closed before it ends
        return handle.status(), loads[0]

    assert asyncio.run(send(2)) == (JobState.PENDING, 3)
    assert asyncio.run(send(1_000)) == (None, 3 * SCRIPT_LOADS)  # each of the enqueue's three tries
