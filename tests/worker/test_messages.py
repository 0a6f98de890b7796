"""The child-to-supervisor protocol: messages survive the pipe, and the pool reads each kind right."""

from __future__ import annotations

import dataclasses
import logging
import multiprocessing
import pickle
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from taskforge.worker.messages import Heartbeat, JobFinished, JobStarted, LaneIdle, Message, Recycling, from_wire
from taskforge.worker.options import WorkerOptions
from taskforge.worker.pool import ChildSlot, Pool

EVERY_KIND = [
    Heartbeat(),
    JobStarted(0, "job-1", "token-1", "default", "app.add", 2, 1.5),
    JobStarted(3, "job-2", "token-2", "mail", "app.send", 1, None),
    JobStarted(1, "job-3", "token-3", "mail", "app.send", 1, 30.0, 3, 25.0),
    JobFinished(0, "succeeded", 0.25),
    JobFinished(1, None, 3.0),
    LaneIdle(2),
    Recycling(),
]


@pytest.mark.parametrize("message", EVERY_KIND, ids=lambda m: type(m).__name__)
def test_a_message_comes_off_the_wire_equal_and_stays_frozen(message: Message) -> None:
    copy = from_wire(pickle.loads(pickle.dumps(message.wire(), protocol=pickle.HIGHEST_PROTOCOL)))
    assert copy == message and type(copy) is type(message)
    assert not hasattr(message, "__dict__")  # slots: one small object per job
    for field in dataclasses.fields(message):  # type: ignore[arg-type]
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(message, field.name, None)


def test_a_message_travels_as_a_plain_tuple_of_its_values() -> None:
    wire = JobStarted(0, "job-1", "token-1", "default", "app.add", 2, None).wire()
    assert type(wire) is tuple and wire[1:] == (0, "job-1", "token-1", "default", "app.add", 2, None, 0, None, (), 0)
    data = pickle.dumps(wire)
    assert b"job_id" not in data and b"JobStarted" not in data  # no field names, no class to look up


@pytest.mark.parametrize("raw", [("start", 0, "a"), (99, 1), (1, "too", "few"), "text", ()])
def test_what_is_no_message_comes_off_the_wire_as_it_is(raw: object) -> None:
    assert from_wire(raw) is raw


class Recorder:
    """Stands in for WorkerMetrics: what the pool reported, in order."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def started(self, queue: str, task: str) -> None:
        self.calls.append(("started", queue, task))

    def finished(self, queue: str, task: str, state: str | None, seconds: float) -> None:
        self.calls.append(("finished", queue, task, state, seconds))


@pytest.fixture
def pool_and_slot() -> Iterator[tuple[Pool, ChildSlot, Any, Recorder]]:
    reader, writer = multiprocessing.get_context("spawn").Pipe(duplex=False)
    metrics = Recorder()
    pool = Pool("tests:app", WorkerOptions(concurrency=1, queues=("default",)), metrics)  # type: ignore[arg-type]
    slot = ChildSlot(0, SimpleNamespace(pid=None), reader)  # type: ignore[arg-type]
    pool.children[0] = slot
    yield pool, slot, writer, metrics
    reader.close()
    writer.close()


def test_the_pool_tracks_each_lane_from_its_messages(pool_and_slot: tuple[Pool, ChildSlot, Any, Recorder]) -> None:
    pool, slot, pipe, metrics = pool_and_slot
    for message in [
        JobStarted(0, "a", "ta", "default", "app.add", 1, None),
        JobStarted(1, "b", "tb", "default", "app.send", 2, 5.0),
        JobFinished(0, "succeeded", 0.5),
        JobStarted(0, "c", "tc", "default", "app.add", 1, None),  # ends "a" too
        JobFinished(1, "retrying", 1.0),
        LaneIdle(1),  # ends "b"
    ]:
        pipe.send(message.wire())
    pool.read_messages(slot)
    assert {lane: r.job.job_id for lane, r in slot.lanes.items()} == {0: "c"}
    assert (slot.lanes[0].job.token, slot.lanes[0].job.attempts, slot.lanes[0].job.timeout) == ("tc", 1, None)
    assert pool.jobs_done == 2
    assert [r.job.job_id for r in pool.running()] == ["c"]
    assert metrics.calls == [
        ("started", "default", "app.add"),
        ("started", "default", "app.send"),
        ("finished", "default", "app.add", "succeeded", 0.5),
        ("started", "default", "app.add"),
        ("finished", "default", "app.send", "retrying", 1.0),
    ]


def test_recycling_and_heartbeats_change_only_what_they_say(
    pool_and_slot: tuple[Pool, ChildSlot, Any, Recorder],
) -> None:
    pool, slot, pipe, metrics = pool_and_slot
    slot.last_seen = 0.0
    pipe.send(Heartbeat().wire())
    pool.read_messages(slot)
    assert slot.last_seen > 0.0 and not slot.recycling and not slot.lanes
    pipe.send(Recycling().wire())
    pipe.send(LaneIdle(0).wire())  # a lane with no job: nothing ends, nothing counts
    pool.read_messages(slot)
    assert slot.recycling and pool.jobs_done == 0 and metrics.calls == []


def test_an_unknown_message_is_logged_and_skipped(
    pool_and_slot: tuple[Pool, ChildSlot, Any, Recorder], caplog: pytest.LogCaptureFixture
) -> None:
    pool, slot, pipe, _ = pool_and_slot
    caplog.set_level(logging.WARNING, logger="taskforge.worker")
    pipe.send(("start", 0, "a"))  # the old tuple form
    pipe.send(LaneIdle(0).wire())
    pool.read_messages(slot)
    assert "child 0 sent ('start', 0, 'a'), which this supervisor does not know" in caplog.text
    assert not slot.lanes
