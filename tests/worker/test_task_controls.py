"""Task controls in real ``taskforge worker`` processes: expiry, retry filters, caller-chosen ids under contention."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis

from taskforge import JobState, TaskForge
from taskforge.job import FailureKind
from tests.conftest import admin_client
from tests.worker.conftest import Worker, stop_workers, wait_for

pytestmark = [pytest.mark.redis, pytest.mark.slow]

APP = """
import asyncio
import os
import time
import redis
from taskforge import SoftTimeout, TaskForge

app = TaskForge("controls")
side = redis.Redis.from_url(os.environ["SIDE_REDIS"])


class Transient(Exception):
    pass


@app.task(name="controls.mark")
def mark(key):
    side.rpush(f"side:{key}", os.getpid())


@app.task(name="controls.picky", dont_retry_on=ValueError, max_attempts=4, backoff=0)
def picky(key, kind):
    side.rpush(f"side:{key}", kind)
    raise ValueError(kind) if kind == "value" else Transient(kind)


@app.task(name="controls.tidy", soft_timeout=0.5, timeout=20, max_attempts=1)
def tidy(key, step):
    started = time.monotonic()
    try:
        while True:
            time.sleep(step)  # one long sleep in the only lane, short ones in a -t lane
    except SoftTimeout:
        side.rpush(f"side:{key}", f"{time.monotonic() - started:.2f}")
        return "tidied"


@app.task(name="controls.careless", soft_timeout=0.3, timeout=20, max_attempts=1)
def careless(key):
    side.rpush(f"side:{key}", "started")
    time.sleep(10)


@app.task(name="controls.stubborn", soft_timeout=0.3, timeout=1.5, max_attempts=1)
def stubborn(key):
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            time.sleep(0.05)
        except SoftTimeout:
            side.incr(f"side:{key}")


@app.task(name="controls.asoft", soft_timeout=0.5, timeout=20, max_attempts=1)
async def asoft(key):
    try:
        await asyncio.sleep(20)
    except asyncio.CancelledError:
        side.rpush(f"side:{key}", "cancelled")
        return "cleaned"
"""


@pytest.fixture
def side(redis_url: str) -> redis.Redis:
    return admin_client(redis_url)


@pytest.fixture
def start_worker(tmp_path: Path, redis_url: str) -> Iterator[Callable[..., Worker]]:
    (tmp_path / "controls.py").write_text(APP)
    started: list[Worker] = []

    def start(*args: str) -> Worker:
        worker = Worker(tmp_path, redis_url, list(args), tmp_path / f"worker-{len(started)}.log", "controls:app")
        started.append(worker)
        return worker

    yield start
    stop_workers(started)


def final(handle, timeout: float = 30) -> JobState:
    return wait_for(lambda: handle.status() if handle.status().finished else None, timeout, f"{handle.id} to end")


def test_an_expired_job_never_runs_and_a_fresh_one_does(start_worker, producer, side) -> None:
    mark = producer.task_for("controls.mark")
    stale = [mark.with_options(expires=0.3).delay(f"stale{n}") for n in range(5)]
    stale.append(mark.with_options(expires=0.3).apply_in(0.6, "stale-scheduled"))
    fresh = mark.with_options(expires=120).delay("fresh")
    time.sleep(1.0)  # every stale job expires before any worker exists
    start_worker("-c", "1")
    assert final(fresh) is JobState.SUCCEEDED
    wait_for(lambda: all(h.status() is JobState.CANCELLED for h in stale), 10, "the scheduled one to expire too")
    for handle in stale:
        info = handle.info()
        assert (info.error, info.failure, info.attempts) == ("expired", FailureKind.EXPIRED, 0)
    assert side.llen("side:fresh") == 1
    assert not any(side.exists(f"side:stale{n}") for n in range(5)) and not side.exists("side:stale-scheduled")


def test_dont_retry_on_ends_the_job_at_once_in_a_worker(start_worker, producer, side) -> None:
    picky = producer.task_for("controls.picky")
    value, other = picky.delay("v", "value"), picky.delay("o", "other")
    start_worker("-c", "1")
    assert final(value) is JobState.DEAD and final(other) is JobState.DEAD
    assert value.info().error == "ValueError: value (ValueError is not retried)"
    assert side.llen("side:v") == 1 and side.llen("side:o") == 4


PRODUCER = """
import sys
from concurrent.futures import ThreadPoolExecutor
from taskforge import TaskForge

app = TaskForge("racer", broker=sys.argv[1])
task = app.task_for("controls.mark").with_options(job_id="invoice-7")
with ThreadPoolExecutor(50) as pool:
    ids = set(pool.map(lambda n: task.delay(f"call{n}").id, range(50)))
print(",".join(sorted(ids)))
"""


def test_a_job_id_sent_200_times_at_once_from_4_processes_stores_one_job(redis_url: str, side) -> None:
    racers = [
        subprocess.Popen([sys.executable, "-c", PRODUCER, redis_url], stdout=subprocess.PIPE, text=True)
        for _ in range(4)
    ]
    outputs = [racer.communicate(timeout=60)[0].strip() for racer in racers]
    assert all(racer.returncode == 0 for racer in racers)
    assert outputs == ["invoice-7"] * 4
    app = TaskForge("checker", broker=redis_url)
    assert app.broker.inspection.counts("default")["pending"] == 1
    assert len(side.keys("taskforge:{default}:job:*")) == 1
    assert app.job("invoice-7").info().task == "controls.mark"


def test_soft_timeouts_reach_the_task_in_the_only_lane_in_a_threaded_lane_and_on_the_loop(start_worker, producer, side):
    """Caught, the task returns (succeeded); uncaught, the job fails with SoftTimeout; ignored, timeout kills it."""
    tidy, careless = producer.task_for("controls.tidy"), producer.task_for("controls.careless")
    single = start_worker("-c", "1")
    caught, failed = tidy.delay("main", 20), careless.delay("careless")
    assert final(caught) is JobState.SUCCEEDED and caught.result(timeout=1) == "tidied"
    assert 0.3 < float(side.lindex("side:main", 0)) < 5, "the sleep was interrupted at the soft timeout"
    assert final(failed) is JobState.DEAD
    assert failed.info().error.startswith("SoftTimeout: "), failed.info().error
    stubborn = producer.task_for("controls.stubborn").delay("stubborn")
    assert final(stubborn) is JobState.DEAD
    assert stubborn.info().failure is FailureKind.TIMEOUT and int(side.get("side:stubborn")) == 1
    single.signal(__import__("signal").SIGTERM)
    assert single.wait(30) == 0, single.output()

    start_worker("-c", "1", "-t", "4")
    lane = tidy.delay("lane", 0.05)
    loop = producer.task_for("controls.asoft").delay("loop")
    assert final(lane) is JobState.SUCCEEDED and lane.result(timeout=1) == "tidied"
    assert 0.3 < float(side.lindex("side:lane", 0)) < 5
    assert final(loop) is JobState.SUCCEEDED and loop.result(timeout=1) == "cleaned"
    assert side.lrange("side:loop", 0, -1) == [b"cancelled"]
