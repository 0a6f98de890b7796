"""memory:// and the embedded broker compile each script once, and behave as fakeredis does."""

from __future__ import annotations

from typing import Any

import fakeredis
import pytest
import redis

from taskforge import TaskForge
from taskforge.broker import fakelua
from taskforge.broker.fakelua import CompiledOnce, compile_once
from taskforge.devbroker import DevBroker


def server_of(app: TaskForge) -> Any:
    return app.broker.client.connection_pool.connection_kwargs["server"]


def counting_compiles(server: Any) -> list[int]:
    runtime = server._lua_runtime._runtime
    count = [0]

    class Counting:
        def compile(self, source: Any) -> Any:
            count[0] += 1
            return runtime.compile(source)

        def __getattr__(self, name: str) -> Any:
            return getattr(runtime, name)

    server._lua_runtime._runtime = Counting()
    return count


def test_each_script_is_compiled_once_per_server() -> None:
    app = TaskForge("tests", broker="memory://")

    @app.task
    def job(n: int) -> int:
        return n

    assert isinstance(server_of(app)._lua_runtime, CompiledOnce)
    compiles = counting_compiles(server_of(app))
    for n in range(50):
        job.delay(n)
    for _ in range(50):
        claims, _ = app.broker.claims.dequeue("default", 30_000)
        assert claims
    # the enqueue, the claim and fakeredis's own clean-up chunk: once each, not 100 times
    assert 1 <= compiles[0] <= 3
    assert app.broker.inspection.counts("default")["running"] == 50


@pytest.mark.parametrize(
    "script",
    [
        "return redis.call('NOSUCHCOMMAND')",
        "return redis.call('GET')",
        "local x = nil; return x.y",
        "return redis.error_reply('my own error')",
        "this is not Lua",
        "undeclared = 1",
    ],
)
def test_errors_read_as_fakeredis_reads_them(script: str) -> None:
    plain = fakeredis.FakeRedis(server=fakeredis.FakeServer())
    server = fakeredis.FakeServer()
    compile_once(server)
    wrapped = fakeredis.FakeRedis(server=server)
    with pytest.raises(redis.ResponseError) as expected:
        plain.eval(script, 0)
    with pytest.raises(redis.ResponseError) as got:
        wrapped.eval(script, 0)
    assert type(got.value) is type(expected.value)
    assert str(got.value) == str(expected.value)


def test_replies_and_keys_are_as_fakeredis_gives_them() -> None:
    script = "redis.call('SET', KEYS[1], ARGV[1]); return {redis.call('GET', KEYS[1]), 7, {ARGV[2]}, false}"
    plain = fakeredis.FakeRedis(server=fakeredis.FakeServer())
    server = fakeredis.FakeServer()
    compile_once(server)
    wrapped = fakeredis.FakeRedis(server=server)
    for args in (("k", "a", "b"), ("other", "c", "d")):
        assert wrapped.eval(script, 1, *args) == plain.eval(script, 1, *args)
    assert wrapped.get("other") == b"c"


def test_the_table_starts_over_when_full(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fakelua, "CHUNKS", 3)
    server = fakeredis.FakeServer()
    compile_once(server)
    client = fakeredis.FakeRedis(server=server)
    for n in range(10):
        assert client.eval(f"return {n}", 0) == n
        assert len(server._lua_runtime._chunks) <= 3


def test_wrapping_twice_keeps_one_wrapper_and_the_embedded_broker_has_it() -> None:
    server = fakeredis.FakeServer()
    compile_once(server)
    first = server._lua_runtime
    compile_once(server)
    assert server._lua_runtime is first
    with DevBroker(port=0) as broker:
        assert isinstance(broker._server.fake_server._lua_runtime, CompiledOnce)
        assert redis.Redis.from_url(broker.url).eval("return 5", 0) == 5
