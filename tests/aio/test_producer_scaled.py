"""The async producer on a Redis Cluster and behind Sentinel, with durability="replicated".

The servers are the scaled tests' own (the session fixtures ``cluster`` and
``sentinel`` of tests/conftest.py, booted once per run); each test keys its
queues by a token of its own. Jobs are run
by ``app.drain()`` (the sync client) and awaited through the async one.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import pytest

from taskforge import BrokerUnavailable, JobHandle, TaskForge, chain, group
from tests.scaled.servers import Cluster, SentinelSet, client, wait_until

from .test_producer import run

pytestmark = pytest.mark.slow


def producer(url: str) -> tuple[TaskForge, Any, list[str]]:
    app = TaskForge("scaled-aio", broker=url, durability="replicated")
    token = uuid.uuid4().hex[:8]
    queues = [f"aio-{token}-{i}" for i in range(12)]  # spread over every master's slots

    @app.task(name="aio.scaled.add", queue=queues[0])
    def add(a: int, b: int = 0) -> int:
        return a + b

    return app, add, queues


async def spread_and_await(app: TaskForge, add: Any, queues: list[str]) -> None:
    handles = [await add.with_options(queue=q).adelay(i, 1) for i, q in enumerate(queues)]
    many = await add.with_options(queue=queues[3]).adelay_many([(i,) for i in range(5)])
    flow = await chain(add.s(1, 1), group(add.with_options(queue=q).s(10) for q in queues[:4])).adelay()
    await asyncio.to_thread(app.drain)  # the sync client runs them; its next steps land on other slots
    assert [await h.aresult(timeout=10) for h in handles] == [i + 1 for i in range(len(queues))]
    assert [await h.aresult(timeout=10) for h in many] == list(range(5))
    assert await flow.aresult(timeout=10) == [12] * 4
    assert await handles[0].acancel() is False  # finished; a script on the slot's master still answers


def test_cluster_every_slot(cluster: Cluster) -> None:
    app, add, queues = producer(cluster.url)
    run(app, lambda: spread_and_await(app, add, queues))


def test_sentinel_master(sentinel: SentinelSet) -> None:
    app, add, queues = producer(sentinel.url)
    run(app, lambda: spread_and_await(app, add, queues))


def test_sentinel_failover_is_retried_through(sentinel: SentinelSet) -> None:
    app, add, queues = producer(sentinel.url)
    heir = sentinel.standby()
    victim = sentinel.current_master()
    total = 120

    def recover() -> None:
        wait_until(lambda: sentinel.current_master() == heir, 30, "the sentinels to promote the replica")
        sentinel.restart(victim, "--replicaof", "127.0.0.1", str(heir))
        wait_until(
            lambda: client(victim).info("replication").get("master_link_status") == "up",
            30,
            "the old master to replicate from the new one",
        )

    async def main() -> None:
        handles: list[JobHandle[int]] = []
        slowest = 0.0

        async def produce() -> None:
            nonlocal slowest
            for i in range(total):
                started = time.monotonic()
                handles.append(await add.with_options(queue=queues[i % len(queues)]).adelay(i))
                slowest = max(slowest, time.monotonic() - started)
                await asyncio.sleep(0.01)

        producing = asyncio.create_task(produce())
        while len(handles) < total // 3:
            await asyncio.sleep(0.01)
        await asyncio.to_thread(sentinel.kill, victim)
        await asyncio.to_thread(recover)
        await asyncio.wait_for(producing, 120)  # no enqueue raised: each was retried through the switch
        assert len({h.id for h in handles}) == total
        await asyncio.to_thread(drain_after_failover, app)
        assert [await h.aresult(timeout=10) for h in handles] == list(range(total))
        print(f"async enqueue through a sentinel failover: longest {slowest:.2f} s")

    run(app, main)


def drain_after_failover(app: TaskForge) -> None:
    """``app.drain()``, tried again while its sync connections still point at the old master.

    The first command on such a connection answers "the previous master is
    now a slave" and the pool connects afresh; a worker's claim loop waits
    that out by itself, ``drain()`` (a test helper) does not.
    """
    for attempt in range(5):
        try:
            app.drain()
            return
        except BrokerUnavailable:
            if attempt == 4:
                raise
            time.sleep(0.5)
