"""Two apps on one queue: a job of a task one worker does not know is left for the worker that serves it."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from taskforge import JobState, TaskForge
from taskforge.broker import workers
from taskforge.broker.keys import QueueKeys

from .conftest import Worker, group_pids, wait_for

pytestmark = [pytest.mark.redis, pytest.mark.slow]

OTHER_APP = """
import os
import time

import redis

from taskforge import TaskForge

app = TaskForge("otherapp")
side = redis.Redis.from_url(os.environ["SIDE_REDIS"])


@app.task
def hello(key):
    side.rpush(f"side:{key}", os.getpid())
    return "hi"


@app.task
def hold(key, seconds):
    # Keep this worker's only child busy for `seconds`, or until the test sets side:KEY:release.
    side.rpush(f"side:{key}:started", os.getpid())
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not side.exists(f"side:{key}:release"):
        time.sleep(0.05)
    return seconds
"""


@pytest.fixture
def other_app(workdir: Path) -> str:
    (workdir / "otherapp.py").write_text(OTHER_APP)
    return "otherapp:app"


def listed(producer: TaskForge, worker: Worker) -> dict[str, Any]:
    def entry() -> dict[str, Any] | None:
        return next((w for w in workers.live_workers(producer.broker.client) if w["pid"] == worker.pid), None)

    return wait_for(entry, 30, f"worker {worker.pid} to be listed")  # type: ignore[return-value]


def finished(handle: Any, timeout: float = 30) -> JobState:
    return wait_for(  # type: ignore[return-value]
        lambda: handle.status() if handle.status().finished else None, timeout, f"job {handle.id} to finish"
    )


def test_jobs_of_another_apps_task_wait_for_its_worker_instead_of_dying(
    start_worker, producer, side, other_app
) -> None:
    theirs = start_worker("-c", "1", "--grace", "1", app=other_app)
    listed(producer, theirs)
    ours = start_worker("-c", "1", "--grace", "1")
    assert listed(producer, ours)["tasks"] and "otherapp.hello" not in listed(producer, ours)["tasks"]
    # Their only child stays busy until ours has met a hello (a fixed 3 s once ended first on a loaded
    # machine, and theirs ran every hello): ours claims what comes next.
    busy = producer.send("otherapp.hold", "h", 60)
    wait_for(lambda: side.llen("side:h:started"), 30, "their worker to be busy")
    hellos = [producer.send("otherapp.hello", f"hi{i}") for i in range(5)]
    mine = producer.send("userapp.record", "mine")
    assert mine.result(timeout=30) == 1
    wait_for(lambda: "does not define task otherapp.hello" in ours.output(), 30, "ours to pass a hello on")
    side.set("side:h:release", 1)
    for handle in hellos:
        assert finished(handle) is JobState.SUCCEEDED, handle.info().error
        assert handle.info().attempts == 1  # passing it on used no attempt
    assert finished(busy) is JobState.SUCCEEDED
    ran_in = {int(side.lindex(f"side:hi{i}", 0)) for i in range(5)}
    assert ran_in <= set(group_pids(theirs.pgid)), ran_in
    log = ours.output()
    assert log.count("does not define task otherapp.hello") == 1  # said once, not per job
    # The second worker to start said, once, that the two serve different tasks, naming them.
    [warning] = [line for line in log.splitlines() if "serve different tasks" in line]
    assert "queue default" in warning and "otherapp.hello" in warning and "userapp.record" in warning


def test_a_passed_job_waits_without_spinning_and_keeps_its_attempts(start_worker, producer, side, other_app) -> None:
    theirs = start_worker("-c", "1", "--grace", "1", app=other_app)
    listed(producer, theirs)
    # Their only child stays busy until released, however long our worker takes to start.
    producer.send("otherapp.hold", "h", 120)
    wait_for(lambda: side.llen("side:h:started"), 30, "their worker to be busy")
    ours = start_worker("-c", "2", "--grace", "1")
    listed(producer, ours)
    handle = producer.send("otherapp.hello", "late")
    key = QueueKeys("default").job(handle.id)
    client = producer.broker.client
    wait_for(lambda: client.hget(key, "passes"), 60, "our worker to pass the job on")
    first = time.monotonic()
    wait_for(lambda: int(client.hget(key, "passes") or 0) >= 3, 60, "our worker to pass the job on twice more")
    between = time.monotonic() - first
    side.set("side:h:release", 1)
    assert finished(handle, 60) is JobState.SUCCEEDED
    # Each pass waits twice as long as the one before (0.5, 1, 2, 4, then 5 s each): 1.5 s from the
    # first pass to the third at least, never a busy loop (a slow machine only makes it longer).
    assert between >= 1.0, between
    assert handle.info().attempts == 1


def test_a_task_no_live_worker_serves_is_still_dead_as_unknown(start_worker, producer) -> None:
    start_worker("-c", "1", "--grace", "1")
    handle = producer.send("otherapp.hello", "nobody")
    assert finished(handle) is JobState.DEAD
    info = handle.info()
    assert info.attempts == 1 and "UnknownTask" in info.error and "'otherapp.hello'" in info.error
