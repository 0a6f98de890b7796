"""A new event loop per call leaves no connection behind: each loop's pool is closed when the loop ends.

``asyncio.run()`` per call (asgiref's ``async_to_sync`` in a sync web
worker, async tests) makes a new loop every time. Counted here: this
process's open file descriptors (``/proc/self/fd``) and the clients the
Redis server lists whose address is one of this process's own sockets, so
other processes on the same server do not count.
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from taskforge import JobState, TaskForge, chain
from tests.conftest import admin_client

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="counts through /proc")

RUNS = 1000
SLACK = 3  # a few descriptors may come and go (the loop's own self-pipe is closed with it)


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def own_ports() -> set[int]:
    """The local ports of this process's TCP sockets."""
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # closed since listed
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    ports = set()
    for table in ("tcp", "tcp6"):
        path = Path(f"/proc/self/net/{table}")
        if not path.exists():
            continue
        for line in path.read_text().splitlines()[1:]:
            fields = line.split()
            if fields[9] in inodes:
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def own_clients(admin: redis.Redis) -> int:
    """The server's clients that are this process's sockets (the counting client itself left out)."""
    ports = own_ports()
    me = admin.client_id()
    return sum(1 for c in admin.client_list() if int(c["addr"].rsplit(":", 1)[1]) in ports and int(c["id"]) != me)


@pytest.fixture
def admin(redis_url: str) -> Iterator[redis.Redis]:
    client = admin_client(redis_url)
    yield client
    client.close()


def define(app: TaskForge) -> Any:
    @app.task(name="loops.add")
    def add(a: int, b: int = 0) -> int:
        return a + b

    return add


@pytest.mark.redis
def test_a_thousand_asyncio_runs_leave_clients_and_fds_flat(redis_url: str, admin: redis.Redis) -> None:
    app = TaskForge("loops", broker=redis_url)
    add = define(app)
    for _ in range(3):  # warm up: imports, the scripts loaded once
        asyncio.run(add.adelay(1))
    fds, clients = open_fds(), own_clients(admin)
    handles = [asyncio.run(add.adelay(i)) for i in range(RUNS)]
    assert open_fds() <= fds + SLACK
    assert own_clients(admin) <= clients
    assert len(app._async_brokers) == 0  # no pool, no loop kept
    assert len({h.id for h in handles}) == RUNS
    assert handles[-1].status() is JobState.PENDING


@pytest.mark.redis
def test_workflows_and_handles_across_loops_leave_nothing_open(redis_url: str, admin: redis.Redis) -> None:
    app = TaskForge("loops", broker=redis_url)
    add = define(app)

    async def launch() -> Any:
        return await chain(add.s(1, 2), add.s(10)).adelay()

    async def follow(flow: Any, step: Any) -> tuple[int, int, Any]:
        info = await flow.ainfo()
        return await flow.aresult(timeout=5), await step.aresult(timeout=5), info

    flow = asyncio.run(launch())
    app.drain()
    fds, clients = open_fds(), own_clients(admin)
    for _ in range(100):
        flow = asyncio.run(launch())  # the handle is made on one loop...
        app.drain()
        step = app.job(f"{flow.id}.1")
        total, last, info = asyncio.run(follow(flow, step))  # ...and awaited on another
        assert (total, last) == (13, 13)
        assert [s.result for s in info.steps] == [3, 13]
    assert open_fds() <= fds + SLACK
    assert own_clients(admin) <= clients
    assert len(app._async_brokers) == 0


@pytest.mark.redis
def test_a_live_loop_keeps_its_pool_while_other_loops_come_and_go(redis_url: str, admin: redis.Redis) -> None:
    """A long-running loop (an ASGI server's) in a thread, and ``asyncio.run`` calls beside it."""
    app = TaskForge("loops", broker=redis_url)
    add = define(app)
    server = asyncio.new_event_loop()
    thread = threading.Thread(target=server.run_forever, daemon=True)
    thread.start()

    def on_server(coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, server).result(timeout=10)

    async def pool() -> Any:
        return app.async_broker()

    try:
        first = on_server(add.adelay(1))
        mine = on_server(pool())
        app.drain()  # the sync client's connection, counted from the start
        fds, clients = open_fds(), own_clients(admin)
        for i in range(200):
            handle = asyncio.run(add.adelay(i))
            if i % 20 == 0:
                app.drain()
                assert on_server(handle.aresult(timeout=5)) == i  # a handle of a gone loop, on the live one
        assert on_server(pool()) is mine  # the live loop's pool was not swept
        assert asyncio.run(first.aresult(timeout=5)) == 1  # a handle of the live loop, on a new one
        assert open_fds() <= fds + SLACK
        assert own_clients(admin) <= clients
        assert len(app._async_brokers) == 1
    finally:
        on_server(app.aclose())
        server.call_soon_threadsafe(server.stop)
        thread.join(timeout=10)
        server.close()
    assert len(app._async_brokers) == 0


@pytest.mark.redis
def test_loops_closed_by_hand_have_their_sockets_closed_at_the_next_loop(redis_url: str, admin: redis.Redis) -> None:
    """No ``shutdown_asyncgens()`` before ``close()``: the pool cannot be awaited closed, its sockets are shut."""
    app = TaskForge("loops", broker=redis_url)
    add = define(app)
    asyncio.run(add.adelay(0))
    fds, clients = open_fds(), own_clients(admin)
    for i in range(100):
        loop = asyncio.new_event_loop()
        loop.run_until_complete(add.adelay(i))
        loop.close()
    assert len(app._async_brokers) == 1  # the last one, until a new loop comes
    assert open_fds() <= fds + SLACK + 1
    asyncio.run(add.adelay(0))  # finds it closed: its socket is shut
    assert len(app._async_brokers) == 0
    assert open_fds() <= fds + SLACK
    assert own_clients(admin) <= clients


def test_memory_loops_leave_no_socket_on_the_in_process_server() -> None:
    """memory://: the fake sockets of each loop's pool leave the shared server, which would keep them (and the loop)."""
    app = TaskForge("loops", broker="memory://")
    add = define(app)
    server = app.broker.client.connection_pool.connection_kwargs["server"]
    asyncio.run(add.adelay(0))
    before = len(server.sockets)
    for i in range(200):
        asyncio.run(add.adelay(i))
    for i in range(20):
        loop = asyncio.new_event_loop()
        loop.run_until_complete(add.adelay(i))
        loop.close()
    asyncio.run(add.adelay(0))
    assert len(server.sockets) <= before
    assert len(app._async_brokers) == 0
    assert len(app.drain()) == 222
