"""Script calls sent on a thread's own connection of redis-py's pool (``broker/direct.py``), real Redis."""

from __future__ import annotations

import gc
import threading

import pytest
import redis

from taskforge import TaskForge
from taskforge.broker.connection import resends
from taskforge.broker.direct import Direct, hiredis_pack
from tests.conftest import admin_client

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


def close_this_threads_connection(app: TaskForge, admin: redis.Redis) -> None:
    """Have the server close the connection this thread keeps (and no other test's)."""
    connection = app.broker.scripts._direct.connection()  # noqa: SLF001
    # Found by its address in the admin's CLIENT LIST: the connection's own user may not run CLIENT ID.
    host, port = connection._sock.getsockname()[:2]  # noqa: SLF001
    (client,) = [c for c in admin.client_list() if c["addr"] == f"{host}:{port}"]
    admin.client_kill_filter(_id=client["id"])


def test_a_call_whose_connection_was_closed_goes_again_as_redis_py_would(app: TaskForge, redis_url: str) -> None:
    admin = admin_client(redis_url)

    @app.task
    def noop():
        pass

    first = noop.delay()  # this thread now holds a connection
    close_this_threads_connection(app, admin)
    before = resends()
    [claim] = app.broker.claims.dequeue("default", 60_000)[0]  # found closed: sent again, counted
    assert claim.id == first.id and resends() == before + 1
    close_this_threads_connection(app, admin)
    # An enqueue is sent once (its caller re-sends it, marked as a re-send): stored once all the same.
    second = noop.delay()
    assert app.broker.inspection.counts("default")["pending"] == 1
    [claim] = app.broker.claims.dequeue("default", 60_000)[0]
    assert claim.id == second.id
    admin.close()


def test_threads_keep_at_most_half_the_pools_connections(redis_url: str) -> None:
    app = TaskForge("direct", broker=f"{redis_url}?max_connections=2")

    @app.task
    def noop():
        pass

    pool = app.broker.client.connection_pool
    assert pool.max_connections == 2
    noop.delay()  # this thread keeps one: half of two
    assert len(pool._in_use_connections) == 1  # noqa: SLF001
    sent, done = threading.Event(), threading.Event()

    def send_and_stay() -> None:
        noop.delay()  # takes one for the call and gives it back
        sent.set()
        done.wait(10)

    thread = threading.Thread(target=send_and_stay)
    thread.start()
    assert sent.wait(10)
    assert len(pool._in_use_connections) == 1  # noqa: SLF001 - the other thread, still alive, keeps none
    done.set()
    thread.join()
    assert [c.task for c in app.broker.claims.dequeue("default", 60_000, 5)[0]] == [noop.name] * 2
    pool.disconnect()


@pytest.mark.parametrize("encoding", ["utf-8", "latin-1"])
def test_a_call_carries_text_as_the_clients_encoding_says(redis_url: str, encoding: str) -> None:
    # UTF-8 is packed by hiredis in one call; another encoding goes through redis-py's packer.
    client = admin_client(redis_url, encoding=encoding)
    try:
        direct = Direct(client)
        # Without hiredis (it is in the "fast" extra) redis-py packs every call.
        assert (direct.pack is not None) == (encoding == "utf-8" and hiredis_pack is not None)
        script = client.register_script("redis.call('SET', KEYS[1], ARGV[1]) return ARGV[2]")
        assert direct(script, ["{direct}:text"], ["tâche.é", 7]) == b"7"
        assert client.get("{direct}:text") == "tâche.é".encode(encoding)
    finally:
        client.delete("{direct}:text")
        client.connection_pool.disconnect()
