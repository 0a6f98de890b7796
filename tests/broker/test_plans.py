"""One plan, two drivers: the same generator run on redis-py and on redis.asyncio gives the same result.

Each test runs a plan through ``drive`` (the app's sync link) and through
``adrive`` (its async link on a fresh loop), on memory:// and on real Redis,
and checks what the plan received: replies, errors thrown in at its
``yield`` after translation, ``on_error`` readings, and the failover
retries a plan makes itself.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar, cast

import pytest
import redis

from taskforge import TaskForge
from taskforge.broker.aio import AsyncBroker
from taskforge.broker.drivers import adrive, drive
from taskforge.broker.keys import QueueKeys
from taskforge.broker.plan import Command, Pipeline, Plan, Sleep, WaitList, one, through_failover
from taskforge.errors import BrokerUnavailable

T = TypeVar("T")


def both(app: TaskForge, make: Callable[[], Plan[T]]) -> tuple[T, T]:
    """``make()``'s plan driven sync, then async (each driver gets a plan of its own)."""
    sync = drive(app.broker.link, make())

    async def main() -> T:
        try:
            return await adrive(cast(AsyncBroker, app.async_broker()).link, make())
        finally:
            await app.aclose()

    return sync, asyncio.run(main())


def counter_plan(key: str) -> Plan[tuple[int, list[Any], bool]]:
    """Replies come back in order, from single commands, pipelines and a blocking read alike."""
    first = yield Command(lambda client: client.incr(key))
    replies = yield Pipeline(lambda pipe: (pipe.incr(key), pipe.get(key), pipe.exists(key + ":none")))
    yield Sleep(0.01)
    waited = yield WaitList(key + ":none", 0.001)
    return first, replies, waited


def test_both_drivers_send_the_same_requests_and_hand_back_the_replies(app: TaskForge) -> None:
    sync, aio = both(app, lambda: counter_plan("taskforge:{plans}:counter"))
    assert sync == (1, [2, b"2", 0], False)
    assert aio == (3, [4, b"4", 0], False)


def wrong_type_plan(key: str) -> Plan[tuple[str, Any]]:
    """A server's error reply is thrown in at the yield; ``on_error`` reads one as a reply instead."""
    yield Command(lambda client: client.set(key, "a string"))
    try:
        yield Command(lambda client: client.hgetall(key), guard=("plans",))
        caught = "nothing"
    except redis.ResponseError as exc:
        caught = str(exc).split(" ", 1)[0]
    read = yield Command(lambda client: client.hgetall(key), guard=None, on_error=lambda exc: "read as this")
    return caught, read


def test_an_error_reply_is_thrown_into_the_plan_or_read_by_its_on_error(app: TaskForge) -> None:
    assert both(app, lambda: wrong_type_plan("taskforge:{plans}:string")) == (("WRONGTYPE", "read as this"),) * 2


def test_a_connection_error_reaches_the_plan_translated(app: TaskForge) -> None:
    def refused(client: Any) -> Any:
        raise redis.ConnectionError("refused")

    def plan() -> Plan[str]:
        try:
            yield Command(refused, guard=None)
        except BrokerUnavailable as exc:
            return "unavailable: " + str(exc).split(" (", 1)[0]
        return "sent"

    sync, aio = both(app, plan)
    assert sync == aio
    assert sync.startswith("unavailable: cannot reach the broker")


def flaky_plan(failures: int, tries: int, counted: list[int]) -> Plan[Any]:
    """A read whose first ``failures`` sends lose their connection, retried ``tries`` times at least."""

    def send(client: Any) -> Any:
        counted.append(1)
        if len(counted) <= failures:
            raise redis.ConnectionError("failing over")
        return client.exists(QueueKeys("plans").paused)

    return through_failover(lambda: one(Command(send, guard=("plans",))), 0.0, tries=tries)


def test_a_plan_retries_through_a_failover_itself_and_then_gives_up(app: TaskForge) -> None:
    runs: list[list[int]] = []

    def make() -> Plan[Any]:
        runs.append([])
        return flaky_plan(2, 3, runs[-1])

    assert both(app, make) == (0, 0)
    assert [len(counted) for counted in runs] == [3, 3]
    counted: list[int] = []
    with pytest.raises(BrokerUnavailable, match="failing over"):
        drive(app.broker.link, flaky_plan(2, 2, counted))
    assert len(counted) == 2
