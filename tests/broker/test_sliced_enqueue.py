"""A big ``delay_many`` goes in slices (broker/batches.py) and stays all or none.

The slice size is set small through the module's knob, so a handful of
jobs exercise what a million do; each test runs on memory:// and real Redis.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
import redis

from taskforge import QueueFull, SerializationError, TaskForge
from taskforge.broker import batch_sweep, batches
from taskforge.errors import BrokerUnavailable
from tests.conftest import inspector

QUEUE = "default"
LEASE = 30_000


@pytest.fixture
def sliced(monkeypatch: pytest.MonkeyPatch) -> list[batches.CommitReply]:
    """Slices of 3 jobs, staged one per round trip; the commit replies the producer read."""
    monkeypatch.setattr(batches, "SLICE_JOBS", 3)
    monkeypatch.setattr(batches, "STAGE_GROUP", 1)
    monkeypatch.setattr(batches, "KEEP_STEP", 2)
    seen: list[batches.CommitReply] = []
    take = batches.Batch.take

    def spy(self: batches.Batch, reply: batches.CommitReply) -> bool:
        seen.append(reply)
        return take(self, reply)

    monkeypatch.setattr(batches.Batch, "take", spy)
    return seen


def add_task(app: TaskForge) -> Any:
    @app.task(name="add")
    def add(a: int, b: int = 0) -> int:
        return a + b

    return add


def visible(app: TaskForge) -> dict[str, int]:
    return app.broker.inspection.counts(QUEUE)


def leftovers(app: TaskForge) -> list[bytes]:
    """Keys a batch keeps while under way: its staged slices, its record, the reservation."""
    client = inspector(app)
    return sorted(k for p in ("*staged:*", "*batch:*", "*reserved", "*batches") for k in client.keys(f"taskforge:{p}"))


def claimed_order(app: TaskForge, count: int) -> list[str]:
    claims, _ = app.broker.claims.dequeue(QUEUE, LEASE, count=count)
    return [c.id for c in claims]


def test_a_big_delay_many_is_stored_in_slices_in_order(app: TaskForge, sliced: list[Any]) -> None:
    add = add_task(app)
    handles = add.delay_many([(i,) for i in range(10)])
    assert [r.kind for r in sliced] == ["KEPT"] + ["SLICE"] * 4 + ["DONE"]  # kept 2 of 4; 3 + 3 + 3 + 1
    assert [h.info().args for h in handles] == [(i,) for i in range(10)]
    assert claimed_order(app, 10) == [h.id for h in handles]
    assert leftovers(app) == []


def test_a_delay_many_within_one_slice_is_one_call(app: TaskForge, sliced: list[Any]) -> None:
    add = add_task(app)
    assert len(add.delay_many([(1,), (2,), (3,)])) == 3
    assert sliced == []  # today's path: one script call
    assert visible(app)["pending"] == 3


def test_a_serialization_error_in_the_last_slice_stores_nothing(app: TaskForge, sliced: list[Any]) -> None:
    add = add_task(app)
    with pytest.raises(SerializationError, match="call #9"):
        add.delay_many([*[(i,) for i in range(9)], (object(),)])
    assert visible(app) == {"pending": 0, "scheduled": 0, "running": 0, "dead": 0, "deferred": 0}
    assert inspector(app).keys("taskforge:*") == [] or leftovers(app) == []


def test_a_lost_connection_while_staging_leaves_nothing_visible_and_the_slices_expire(
    app: TaskForge, sliced: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(batches, "STAGE_TTL_MS", 3000)  # 400 ms: a loaded machine saw one slice expire before the look
    add = add_task(app)
    run_each = app.broker.jobs.scripts.run_each
    sent: list[int] = []

    def dropping(calls: Any) -> Any:
        sent.append(1)
        if len(sent) > 2:  # the connection drops after two slices were staged, for good
            raise redis.ConnectionError("connection lost")
        return run_each(calls)

    monkeypatch.setattr(app.broker.jobs.scripts, "run_each", dropping)
    with pytest.raises(BrokerUnavailable):
        add.delay_many([(i,) for i in range(10)])
    assert visible(app) == {"pending": 0, "scheduled": 0, "running": 0, "dead": 0, "deferred": 0}
    assert inspector(app).keys("taskforge:*job:*") == []
    assert len(inspector(app).keys("taskforge:*staged:*")) == 2  # invisible to workers
    deadline = time.monotonic() + 10
    while inspector(app).keys("taskforge:*staged:*") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert leftovers(app) == []  # the abandoned slices went by themselves


class Crash(Exception):
    """The producer's process dies between two commit steps."""


def test_a_batch_committed_by_a_producer_that_died_is_finished_by_a_worker(
    broker_url: str, sliced: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    app = TaskForge("tests", broker=broker_url, max_size=12)
    add = add_task(app)
    take = batches.Batch.take

    def crash_after_two(self: batches.Batch, reply: batches.CommitReply) -> bool:
        if len(sliced) == 3:  # KEPT, then two slices: the third is stored as the producer dies
            raise Crash
        return take(self, reply)

    monkeypatch.setattr(batches.Batch, "take", crash_after_two)
    with pytest.raises(Crash):
        add.delay_many([(i,) for i in range(10)])
    # Three slices stored (the third's reply was read as it died), claimable: the batch is committed.
    assert visible(app)["pending"] == 9
    # The rest is promised: max_size counts it, so 12 - 10 leaves room for 2 jobs, not 3.
    add.delay_many([(100,), (101,)])
    with pytest.raises(QueueFull):
        add.delay(102)
    monkeypatch.setattr(batches, "STALE_MS", 0)
    monkeypatch.setattr(batch_sweep, "FINISH_EVERY", 0.0)
    app.broker.claims.reclaim(QUEUE)  # a worker's reclaim duty finishes the batch
    assert visible(app)["pending"] == 12
    claims, _ = app.broker.claims.dequeue(QUEUE, LEASE, count=12)
    assert len({c.id for c in claims}) == 12  # each job once
    assert [k for k in leftovers(app) if b"batch:" not in k] == []


def test_a_live_producers_batch_is_not_finished_by_a_worker(
    app: TaskForge, sliced: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    add = add_task(app)
    take = batches.Batch.take

    def sweep_midway(self: batches.Batch, reply: batches.CommitReply) -> bool:
        if len(sliced) == 3:
            monkeypatch.setattr(batch_sweep, "FINISH_EVERY", 0.0)
            assert app.broker.claims.finish_batches(QUEUE) == 0  # moved just now: its producer is at it
        return take(self, reply)

    monkeypatch.setattr(batches.Batch, "take", sweep_midway)
    handles = add.delay_many([(i,) for i in range(10)])
    assert claimed_order(app, 10) == [h.id for h in handles]


def test_max_size_is_checked_for_the_whole_batch(broker_url: str, sliced: list[Any]) -> None:
    app = TaskForge("tests", broker=broker_url, max_size=9)
    add = add_task(app)
    with pytest.raises(QueueFull, match="10 jobs were not stored"):
        add.delay_many([(i,) for i in range(10)])
    assert visible(app)["pending"] == 0
    assert leftovers(app) == []
    assert len(add.delay_many([(i,) for i in range(9)])) == 9


def test_a_lost_reply_still_answers_the_unique_lock_holder(
    app: TaskForge, sliced: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    @app.task(name="once", unique_for=60)
    def once(n: int) -> int:
        return n

    holder = once.delay(4)
    take = batches.Batch.take

    def lose_slice_one(self: batches.Batch, reply: batches.CommitReply) -> bool:
        if reply.at == 1:
            return False  # the reply of slice 1 (calls 3 to 5) never arrived
        return take(self, reply)

    monkeypatch.setattr(batches.Batch, "take", lose_slice_one)
    handles = once.delay_many([(i,) for i in range(8)])
    assert handles[4].id == holder.id
    assert len({h.id for h in handles}) == 8
    assert visible(app)["pending"] == 8


def test_adelay_many_goes_in_slices_too(app: TaskForge, sliced: list[Any]) -> None:
    add = add_task(app)
    handles = asyncio.run(add.adelay_many([(i,) for i in range(7)]))
    assert [r.kind for r in sliced] == ["KEPT"] + ["SLICE"] * 3 + ["DONE"]  # kept 2 of 3
    assert claimed_order(app, 7) == [h.id for h in handles]
    assert leftovers(app) == []


def test_a_batch_abandoned_before_its_commit_is_dropped_by_a_worker(
    app: TaskForge, sliced: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    add = add_task(app)
    take = batches.Batch.take

    def crash_while_keeping(self: batches.Batch, reply: batches.CommitReply) -> bool:
        assert reply.kind == "KEPT"
        raise Crash  # the slices are kept from expiring, the batch is not committed yet

    monkeypatch.setattr(batches.Batch, "take", crash_while_keeping)
    with pytest.raises(Crash):
        add.delay_many([(i,) for i in range(10)])
    monkeypatch.setattr(batches.Batch, "take", take)
    assert visible(app)["pending"] == 0
    client = inspector(app)
    ttls = sorted(client.ttl(k) for k in client.keys("taskforge:*staged:*"))
    assert ttls[:2] == [-1, -1] and min(ttls[2:]) > 0  # two of four kept from expiring by the first step
    monkeypatch.setattr(batches, "STALE_MS", 0)
    monkeypatch.setattr(batch_sweep, "FINISH_EVERY", 0.0)
    app.broker.claims.reclaim(QUEUE)
    assert visible(app)["pending"] == 0
    # Nothing stored; nothing left but the two slices that expire by themselves.
    assert [client.ttl(k) > 0 for k in leftovers(app)] == [True, True]


def test_adelay_many_checks_max_size_for_the_whole_batch(broker_url: str, sliced: list[Any]) -> None:
    app = TaskForge("tests", broker=broker_url, max_size=9)
    add = add_task(app)
    with pytest.raises(QueueFull, match="10 jobs were not stored"):
        asyncio.run(add.adelay_many([(i,) for i in range(10)]))
    assert visible(app)["pending"] == 0
    assert leftovers(app) == []  # the refused batch was dropped, its kept slices with it
