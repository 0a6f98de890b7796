"""Script calls sent on a thread's own connection of redis-py's pool (``broker/direct.py``), real Redis."""

from __future__ import annotations

import gc
import threading

import pytest
import redis

from taskforge import TaskForge
from taskforge.broker.connection import resends

pytestmark = pytest.mark.redis


@pytest.fixture
def app(redis_url: str):
    app = TaskForge("direct", broker=redis_url)
    yield app
    app.broker.client.connection_pool.disconnect()


def test_a_thread_gives_its_connection_back_when_it_ends(app: TaskForge) -> None:
    @app.task
    def noop():
        pass

    def send() -> None:
        noop.delay()

    for _ in range(20):
        thread = threading.Thread(target=send)
        thread.start()
        thread.join()
    gc.collect()
    pool = app.broker.client.connection_pool
    # Every one is back (a thread's may come back a moment after the next thread took another).
    assert len(pool._in_use_connections) == 0  # noqa: SLF001
    assert pool._available_connections  # noqa: SLF001


def test_a_call_whose_connection_was_closed_goes_again_as_redis_py_would(app: TaskForge, redis_url: str) -> None:
    admin = redis.Redis.from_url(redis_url)

    @app.task
    def noop():
        pass

    first = noop.delay()  # this thread now holds a connection
    admin.client_kill_filter(_type="normal", skipme=True)  # the server closes it
    before = resends()
    [claim] = app.broker.claims.dequeue("default", 60_000)[0]  # found closed: sent again, counted
    assert claim.id == first.id and resends() == before + 1
    admin.client_kill_filter(_type="normal", skipme=True)
    # An enqueue is sent once (its caller re-sends it, marked as a re-send): stored once all the same.
    second = noop.delay()
    assert app.broker.inspection.counts("default")["pending"] == 1
    [claim] = app.broker.claims.dequeue("default", 60_000)[0]
    assert claim.id == second.id
    admin.close()
