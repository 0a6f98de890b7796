"""The producer side's seams: job building, after-enqueue callbacks, eager mode, swapping a broker,
and ``Task``/``JobHandle`` working against the small protocols instead of a whole ``TaskForge``."""

from __future__ import annotations

from typing import Any

import pytest

from taskforge import JobHandle, JobState, SerializationError, TaskForge
from taskforge.broker import Broker
from taskforge.broker.connection import connect
from taskforge.broker.queue import NewJob
from taskforge.building import build_job
from taskforge.finals import Finals
from taskforge.protocols import Producer
from taskforge.serialization import loads_call
from taskforge.testing import is_eager, set_eager, use_broker


def memory_broker() -> Broker:
    return Broker(connect("memory://"), "memory://", 60_000, 60_000)


def test_build_job_carries_the_call_and_the_task_options() -> None:
    app = TaskForge("b", broker="memory://")

    @app.task(priority="high", max_attempts=5, timeout=2.5, unique_for=30, rate_limit="10/s")
    def charge(order: int, currency: str = "EUR") -> None: ...

    job = build_job(charge, (7,), {"currency": "USD"}, delay_ms=1500)
    assert isinstance(job, NewJob) and len(job.id) == 32
    assert loads_call(job.payload) == ((7,), {"currency": "USD"})
    assert (job.task, job.priority, job.max_attempts, job.timeout_ms) == (charge.name, 2, 5, 2500)
    assert (job.delay_ms, job.due_ms, job.inherit, job.limits) == (1500, None, False, "10:1000:0")
    assert job.unique_digest == charge.unique_lock((7,), {"currency": "USD"}, job.payload) and job.lock_ttl_ms == 30_000
    assert build_job(charge, (7,), {}).id != job.id
    assert build_job(app.task_for("elsewhere.t"), (), {}).inherit is True


def test_build_job_refuses_a_job_over_max_job_size() -> None:
    app = TaskForge("b", broker="memory://", max_job_size=100)

    @app.task
    def store(blob: bytes) -> None: ...

    with pytest.raises(SerializationError, match="max_job_size of 100"):
        build_job(store, (b"x" * 200,), {})
    assert app._broker is None, "building a job touches no broker"


def test_after_enqueue_callbacks_see_each_single_job_in_order() -> None:
    app = TaskForge("b", broker="memory://")
    seen: list[str] = []
    app.after_enqueue.append(lambda handle: seen.append(handle.id))

    @app.task
    def add(a: int, b: int) -> int:
        return a + b

    handles = [add.delay(1, 2), add.apply_in(60, 3, 4), app.send(add.name, 5, 6)]
    assert seen == [h.id for h in handles]
    add.delay_many([(7, 8)])  # a batch is not announced one by one (eager mode never drained it)
    assert len(seen) == 3


def test_a_failing_after_enqueue_callback_reaches_the_caller_after_the_job_is_stored() -> None:
    app = TaskForge("b", broker="memory://")

    @app.task
    def ping() -> str:
        return "pong"

    def refuse(handle: JobHandle[Any]) -> None:
        raise RuntimeError(f"saw {handle.id}")

    app.after_enqueue.append(refuse)
    with pytest.raises(RuntimeError, match="saw "):
        ping.delay()
    assert app.broker.inspection.counts("default")["pending"] == 1


def test_eager_is_an_after_enqueue_callback_switched_on_and_off() -> None:
    app = TaskForge("b", broker="memory://")

    @app.task
    def double(x: int) -> int:
        return 2 * x

    assert is_eager(app) is False and app.after_enqueue == []
    set_eager(app, True)
    set_eager(app, True)  # idempotent: one callback, one drain per delay()
    assert is_eager(app) is True and len(app.after_enqueue) == 1
    assert double.delay(21).status() is JobState.SUCCEEDED
    set_eager(app, False)
    assert app.after_enqueue == [] and double.delay(1).status() is JobState.PENDING
    with pytest.raises(AttributeError, match=r"set_eager\(app, True\)"):
        app.eager = True  # type: ignore[attr-defined]  # the old switch: an error, not a silent no-op
    assert is_eager(app) is False


def test_use_broker_swaps_and_returns_the_previous_one() -> None:
    app = TaskForge("b", broker="memory://")
    first = app.broker
    other = memory_broker()
    assert use_broker(app, other) is first and app.broker is other
    assert use_broker(app, None) is other
    assert app._broker is None and app.broker is not other  # connects again from the URL


def test_the_fixture_swaps_through_use_broker_and_restores(taskforge_app: Any) -> None:
    app = TaskForge("b", broker="memory://")
    original = app.broker
    assert taskforge_app(app, eager=True) is app
    assert app.broker is not original and is_eager(app) is True


class Outbox:
    """A producer that is not a TaskForge: a broker and the settings of the Producer protocol."""

    def __init__(self) -> None:
        self.broker = memory_broker()
        self.max_size = 0
        self.max_job_size = 0
        self.stored: list[str] = []
        self.send_hooks: list[Any] = []
        self.finals = Finals()  # no listener: a job it cancels tells nobody
        self.after_enqueue = [lambda handle: self.stored.append(handle.id)]

    def queues(self) -> list[str]:
        return ["default"]


def test_task_and_handle_need_only_the_producer_protocol() -> None:
    outbox: Producer = Outbox()
    app = TaskForge("b", broker="memory://")

    @app.task
    def greet(name: str) -> str:
        return f"hello {name}"

    task = greet.with_options(queue="default")
    task.app = outbox
    handle = task.delay("ann")
    assert isinstance(outbox, Outbox) and outbox.stored == [handle.id]
    assert app._broker is None, "the task queued through the outbox, not its app"
    info = JobHandle(outbox, handle.id).info()
    assert (info.task, info.args, info.state) == (greet.name, ("ann",), JobState.PENDING)
