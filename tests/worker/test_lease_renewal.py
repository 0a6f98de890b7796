"""The supervisor's lease renewal, driven directly: which lost claims it reports."""

from __future__ import annotations

import logging
import time
from types import SimpleNamespace

import pytest

from taskforge import TaskForge
from taskforge.worker.board import LaneBatches
from taskforge.worker.messages import JobStarted
from taskforge.worker.supervisor import Running, Supervisor, WorkerOptions

LOST = "no longer holds its claim"


def supervisor_holding(app: TaskForge, running: Running) -> Supervisor:
    sup = Supervisor(app, "tests:app", WorkerOptions(concurrency=1, queues=("default",)))
    sup.pool.children = {0: SimpleNamespace(lanes={0: running}, batches=LaneBatches(None))}  # type: ignore[dict-item]
    return sup


def lost_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if LOST in r.getMessage()]


def test_a_job_its_own_child_just_recorded_is_not_reported_lost(
    app: TaskForge, caplog: pytest.LogCaptureFixture
) -> None:
    @app.task(max_attempts=3)
    def job():
        pass

    first, second = job.delay(), job.delay()
    [claim], _ = app.broker.claims.dequeue("default", 30_000)
    sup = supervisor_holding(app, Running(JobStarted(0, claim.id, claim.token, "default", claim.task, 1, None)))
    caplog.set_level(logging.WARNING, logger="taskforge.worker")
    # The child failed its job (retrying) but its next message has not arrived yet.
    assert app.broker.claims.fail("default", claim.id, claim.token, "boom", "", 0) == "retrying"
    sup.renew_leases()
    # Then it did: it moved on to the next job.
    [nxt], _ = app.broker.claims.dequeue("default", 30_000)
    assert {claim.id, nxt.id} <= {first.id, second.id}
    sup.pool.children[0].lanes[0] = Running(JobStarted(0, nxt.id, nxt.token, "default", nxt.task, 1, None))
    sup.renew_leases()
    assert lost_warnings(caplog) == []


def test_a_claim_taken_over_is_reported_from_the_second_renewal(
    app: TaskForge, caplog: pytest.LogCaptureFixture
) -> None:
    @app.task(max_attempts=3)
    def job():
        pass

    handle = job.delay()
    [old], _ = app.broker.claims.dequeue("default", 50)
    time.sleep(0.1)
    assert app.broker.claims.reclaim("default") == ([handle.id], [], 0)
    [new], _ = app.broker.claims.dequeue("default", 30_000)
    assert new.token != old.token
    sup = supervisor_holding(app, Running(JobStarted(0, old.id, old.token, "default", old.task, 1, None)))
    caplog.set_level(logging.WARNING, logger="taskforge.worker")
    sup.renew_leases()
    assert lost_warnings(caplog) == []
    sup.renew_leases()
    assert lost_warnings(caplog) == [
        f"{handle.id} in default: this worker no longer holds its claim (its lease expired and the job was reclaimed)"
    ]


def test_a_second_signal_inside_the_first_ones_handling_stops_now(app: TaskForge) -> None:
    """Python may run the handler again inside itself: the second signal must not get the grace period too."""
    import signal

    sup = Supervisor(app, "tests:app", WorkerOptions(concurrency=1, queues=("default",), grace=60))

    @app.on("worker_stopping")
    def second_signal_meanwhile(event: object) -> None:
        sup.on_signal(signal.SIGINT, None)

    sup.on_signal(signal.SIGTERM, None)
    assert sup.stopping and sup.stop_deadline <= time.monotonic()
    later = Supervisor(app, "tests:app", WorkerOptions(concurrency=1, queues=("default",), grace=60))
    app.hooks.handlers["worker_stopping"].clear()
    later.on_signal(signal.SIGTERM, None)
    assert later.stop_deadline > time.monotonic() + 50  # one signal: the grace period
    later.on_signal(signal.SIGINT, None)
    assert later.stop_deadline <= time.monotonic()
