"""Job headers and producer hooks: what integrations build on, on memory:// and on real Redis."""

from __future__ import annotations

import asyncio
from contextlib import contextmanager
from typing import Any

import pytest

from taskforge import JobState, TaskForge, chain, current_job, group
from taskforge.errors import SerializationError
from taskforge.sending import Outgoing
from tests.conftest import inspector


def job_key(app: TaskForge, job_id: str) -> bytes:
    [key] = [k for k in inspector(app).keys(f"*{job_id}*") if b":job:" in k]
    return key


def test_an_app_without_hooks_stores_no_headers(app: TaskForge) -> None:
    @app.task
    def add(x: int, y: int) -> int:
        return x + y

    handle = add.delay(1, 2)
    assert not app.broker.client.hexists(job_key(app, handle.id), "headers")  # the record of before headers
    assert handle.info().headers == {}
    [ran] = app.drain()
    assert ran.result == 3 and ran.headers == {}


def marking(app: TaskForge, name: str, value: str) -> list[Outgoing]:
    """A hook that adds one header to every enqueue of ``app``; returns what it saw."""
    seen: list[Outgoing] = []

    @app.around_enqueue
    def mark(outgoing: Outgoing) -> None:
        seen.append(outgoing)
        outgoing.headers[name] = value

    return seen


def test_hooks_add_headers_to_every_kind_of_enqueue(app: TaskForge) -> None:
    seen = marking(app, "tenant", "acme")

    @app.task
    def echo(x: Any) -> Any:
        assert current_job().headers == {"tenant": "acme"}
        return x

    one = echo.delay(1)
    many = echo.delay_many([(2,), (3,)])
    by_name = app.send(echo.name, 4)
    later = echo.apply_in(0, 5)

    async def adelay() -> Any:
        try:
            return await echo.adelay(6)
        finally:
            await app.aclose()

    awaited = asyncio.run(adelay())
    for handle in [one, *many, by_name, later, awaited]:
        assert handle.info().headers == {"tenant": "acme"}
        assert app.broker.client.hget(job_key(app, handle.id), "headers") == b'{"tenant":"acme"}'  # JSON
        assert handle.info().args[0] in (1, 2, 3, 4, 5, 6)  # the headers are not arguments
    assert [o.operation for o in seen] == ["send", "send_many", "send", "send", "send"]
    assert seen[1].job_ids == tuple(h.id for h in many)
    assert seen[0].queue == "default" and seen[0].task == echo.name
    infos = app.drain()
    assert {i.result for i in infos} == {1, 2, 3, 4, 5, 6}
    assert all(i.headers == {"tenant": "acme"} for i in infos)


def test_every_step_of_a_workflow_carries_its_start_headers(app: TaskForge) -> None:
    seen = marking(app, "trace", "t1")

    @app.task
    def add(x: int, y: int) -> int:
        return x + y

    @app.task
    def total(values: list[int]) -> int:
        return sum(values)

    flow = chain(add.s(1, 2), add.s(10), group(add.s(1), add.s(2)), total.s()).delay()
    infos = app.drain()
    assert flow.result(timeout=5) == (13 + 1) + (13 + 2)
    assert len(infos) == 5 and all(i.headers == {"trace": "t1"} for i in infos)
    assert [o.operation for o in seen] == ["workflow"]
    assert seen[0].job_ids == tuple(f"{flow.id}.{i}" for i in range(5))


def test_a_hooks_context_manager_is_held_around_the_store_and_sees_its_failure(app: TaskForge) -> None:
    events: list[str] = []

    @contextmanager
    def span(outgoing: Outgoing) -> Any:
        events.append("enter")
        try:
            yield
        except Exception as exc:
            events.append(f"error {type(exc).__name__}")
            raise
        events.append("exit")

    app.around_enqueue(span)

    @app.task(unique_for=60)
    def once(x: int) -> int:
        return x

    once.delay(1)
    assert events == ["enter", "exit"]
    app.max_size = 1
    with pytest.raises(Exception) as caught:
        once.delay(2)
    assert events[-1] == f"error {type(caught.value).__name__}"


def test_bad_headers_and_a_failing_hook_store_nothing(app: TaskForge) -> None:
    @app.task
    def noop() -> None:
        return None

    def bad(outgoing: Outgoing) -> None:
        outgoing.headers["n"] = 1  # type: ignore[assignment]

    app.around_enqueue(bad)
    with pytest.raises(SerializationError, match="job headers map non-empty str names to str values"):
        noop.delay()
    app.send_hooks.clear()

    def broken(outgoing: Outgoing) -> None:
        raise RuntimeError("no tenant")

    app.around_enqueue(broken)
    with pytest.raises(RuntimeError, match="no tenant"):
        noop.delay()
    app.send_hooks.clear()
    assert app.drain() == []


def test_headers_count_in_max_job_size(broker_url: str) -> None:
    app = TaskForge("sized", broker=broker_url, max_job_size=300)

    @app.task
    def noop(x: str) -> None:
        return None

    noop.delay("x" * 100)

    @app.around_enqueue
    def big(outgoing: Outgoing) -> None:
        outgoing.headers["blob"] = "y" * 300

    with pytest.raises(SerializationError, match="max_job_size"):
        noop.delay("x" * 100)
    assert [i.state for i in app.drain()] == [JobState.SUCCEEDED]


@pytest.mark.parametrize("junk", [b"{not json", b'{"h": 1}', b"[1, 2]", b"\xff\xfe", b'"text"'])
def test_junk_headers_written_into_redis_cost_the_job_its_headers_not_its_run(app: TaskForge, junk: bytes) -> None:
    seen: list[dict[str, str]] = []

    @app.middleware
    def look(job: Any, call_next: Any) -> Any:
        seen.append(job.headers)
        return call_next()

    @app.task
    def echo(x: int) -> int:
        return x

    victim = echo.delay(1)
    app.broker.client.hset(job_key(app, victim.id), "headers", junk)
    assert victim.info().headers == {}
    [ran] = app.drain()
    assert ran.result == 1 and ran.state is JobState.SUCCEEDED and seen == [{}]
