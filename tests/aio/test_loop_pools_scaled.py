"""Cluster and Sentinel: each loop's pools (every node's, the sentinels' own) are closed with the loop.

Durability "replicated" adds a plain client per cluster master (for WAIT),
and a Sentinel client keeps clients of the sentinels: all are counted
through this process's open file descriptors. The servers are the scaled
tests' own (the session fixtures of tests/conftest.py, booted once per run).
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import pytest

from taskforge import TaskForge
from tests.scaled.servers import Cluster, SentinelSet

from .test_loop_pools import SLACK, open_fds
from .test_producer_scaled import producer  # the cluster and sentinel fixtures are tests/conftest.py's

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="counts through /proc"),
]


def runs_stay_flat(app: TaskForge, add: Any, queues: list[str]) -> None:
    async def send(i: int) -> Any:
        return await add.with_options(queue=queues[i % len(queues)]).adelay(i)

    for i in range(len(queues)):  # every master met once: the count starts from the busiest state
        asyncio.run(send(i))
    fds = open_fds()
    handles = [asyncio.run(send(i)) for i in range(60)]
    assert open_fds() <= fds + SLACK
    assert len(app._async_brokers) == 0
    for i in range(5):  # closed by hand: shut at the next loop
        loop = asyncio.new_event_loop()
        handles.append(loop.run_until_complete(send(i)))
        loop.close()
    asyncio.run(send(0))
    assert open_fds() <= fds + SLACK
    app.drain()
    assert asyncio.run(handles[-1].aresult(timeout=10)) == 4


def test_cluster_loops_leave_no_connection(cluster: Cluster) -> None:
    runs_stay_flat(*producer(cluster.url))


def test_sentinel_loops_leave_no_connection(sentinel: SentinelSet) -> None:
    runs_stay_flat(*producer(sentinel.url))
