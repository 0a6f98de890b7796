"""``async def`` tasks in a real ``taskforge worker``: many at once per child, leases kept while the loop blocks.

The app the workers run is written out below (``APP``) into each test's
directory; its tasks record what they saw under ``side:*`` keys of the test
Redis. The producer never imports it: it sends by name, or through sync
stand-ins registered under the same names (for priorities and workflows).
"""

from __future__ import annotations

import signal
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis

from taskforge import JobState, TaskForge, chain
from tests.conftest import admin_client
from tests.worker.conftest import Worker, free_port, stop_workers, wait_for

pytestmark = [pytest.mark.redis, pytest.mark.slow]

APP = """
import asyncio
import os
import signal
import time

import redis

from taskforge import TaskForge, current_job

app = TaskForge("asyncapp")
side = redis.Redis.from_url(os.environ["SIDE_REDIS"])


@app.task(name="asyncapp.nap")
async def nap(seconds, key):
    side.rpush(f"side:{key}:started", os.getpid())
    await asyncio.sleep(seconds)
    side.rpush(f"side:{key}", os.getpid())
    return key


@app.task(name="asyncapp.blocker")
async def blocker(seconds, key):
    side.rpush(f"side:{key}:runs", os.getpid())
    time.sleep(seconds)  # holds the loop: what a careless task does
    return "done"


@app.task(name="asyncapp.patient", timeout=1, max_attempts=1)
async def patient(key):
    side.rpush(f"side:{key}:started", os.getpid())
    try:
        await asyncio.sleep(30)
    except asyncio.CancelledError:
        side.set(f"side:{key}:cancelled", 1)
        raise


@app.task(name="asyncapp.stubborn", timeout=1, max_attempts=1)
async def stubborn(key):
    side.rpush(f"side:{key}:started", os.getpid())
    while True:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            side.incr(f"side:{key}:ignored")


@app.task(name="asyncapp.abortable")
async def abortable(key):
    side.rpush(f"side:{key}:started", os.getpid())
    try:
        await asyncio.sleep(60)
    except asyncio.CancelledError:
        side.set(f"side:{key}:cancelled", 1)
        raise


@app.task(name="asyncapp.ordered", priority="low")
async def ordered(key, n):
    side.rpush(f"side:{key}", n)
    await asyncio.sleep(0.5)


@app.task(name="asyncapp.whoami")
async def whoami():
    job = current_job()
    await asyncio.sleep(0.2)  # the other jobs run meanwhile, each in its own context
    return [job.id, current_job().id, job.attempt]


@app.task(name="asyncapp.where")
def where(key):
    side.rpush(f"side:{key}", f"sync {os.getpid()}")


@app.task(name="asyncapp.awhere")
async def awhere(key):
    await asyncio.sleep(0.01)
    side.rpush(f"side:{key}", f"async {os.getpid()}")


@app.task(name="asyncapp.add")
async def add(x, y):
    await asyncio.sleep(0.01)
    return x + y


@app.task(name="asyncapp.double")
def double(x):
    return 2 * x
"""


@pytest.fixture
def side(redis_url: str) -> redis.Redis:
    return admin_client(redis_url)


@pytest.fixture
def producer(redis_url: str) -> TaskForge:
    return TaskForge("producer", broker=redis_url)


@pytest.fixture
def start_worker(tmp_path: Path, redis_url: str) -> Iterator[Callable[..., Worker]]:
    (tmp_path / "asyncapp.py").write_text(APP)
    started: list[Worker] = []

    def start(*args: str) -> Worker:
        log = tmp_path / f"worker-{len(started)}.log"
        worker = Worker(tmp_path, redis_url, list(args), log, "asyncapp:app")
        started.append(worker)
        return worker

    yield start
    stop_workers(started)


def final(handle, timeout: float = 30) -> JobState:
    return wait_for(lambda: handle.status() if handle.status().finished else None, timeout, f"{handle.id} to end")


def test_200_async_jobs_of_one_second_finish_in_under_10_s_on_one_child(start_worker, producer, side) -> None:
    worker = start_worker("-c", "1")
    worker.wait_children(1)
    warm = producer.send("asyncapp.nap", 0, "warm")
    assert final(warm) is JobState.SUCCEEDED  # the child is up and its loop runs
    started = time.monotonic()
    handles = [producer.send("asyncapp.nap", 1, "many") for _ in range(200)]
    wait_for(lambda: side.llen("side:many") == 200, 30, "200 naps to end")
    elapsed = time.monotonic() - started
    assert elapsed < 10, f"200 one-second naps took {elapsed:.1f} s on one child"
    # A nap writes its side entry before its success is recorded (the lane reports in batches).
    wait_for(lambda: all(h.status().finished for h in handles), 30, "the 200 successes to be recorded")
    assert {h.status() for h in handles} == {JobState.SUCCEEDED}
    assert len(set(side.lrange("side:many", 0, -1))) == 1  # all in one process


def test_a_task_blocking_its_loop_past_the_lease_runs_once_and_is_named(start_worker, producer, side) -> None:
    port = free_port()
    worker = start_worker("-c", "1", "--visibility-timeout", "1", "--metrics-port", str(port))
    # Longer than the lease plus the slow reclaim period of a worker that thinks it holds no job.
    handle = producer.send("asyncapp.blocker", 7, "b")
    assert final(handle) is JobState.SUCCEEDED
    assert handle.info().attempts == 1
    time.sleep(2)  # a second claim would have started by now
    assert side.llen("side:b:runs") == 1
    assert "reclaimed" not in worker.output()
    wait_for(lambda: "event loop blocked for" in worker.output(), 10, "the loop-lag warning")
    line = next(x for x in worker.output().splitlines() if "event loop blocked" in x)
    assert "WARNING" in line and handle.id in line and "asyncapp.blocker" in line
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    assert 'taskforge_loop_blocked_total{queue="default",task="asyncapp.blocker"} 1.0' in body


def test_a_timed_out_async_task_sees_cancelled_error_and_its_child_lives(start_worker, producer, side) -> None:
    start_worker("-c", "1")
    handle = producer.send("asyncapp.patient", "p")
    assert final(handle) is JobState.DEAD
    assert "timeout of 1 s and was cancelled" in handle.info().error
    assert side.get("side:p:cancelled") == b"1"
    assert final(producer.send("asyncapp.nap", 0, "after")) is JobState.SUCCEEDED
    assert side.lrange("side:after", 0, -1) == side.lrange("side:p:started", 0, -1)  # cancelled, not killed


def test_a_task_ignoring_cancellation_is_killed_and_the_others_run_again(start_worker, producer, side) -> None:
    start_worker("-c", "1")
    others = [producer.send("asyncapp.nap", 6, "o") for _ in range(3)]
    wait_for(lambda: side.llen("side:o:started") == 3, 20, "the other jobs to start")
    stubborn = producer.send("asyncapp.stubborn", "s")
    assert final(stubborn) is JobState.DEAD
    assert "was killed" in stubborn.info().error
    assert side.get("side:s:ignored") == b"1"  # it was asked first
    assert [final(h) for h in others] == [JobState.SUCCEEDED] * 3
    # Killed with the stubborn job's child, given back unrun, and run again from the start.
    assert [h.info().attempts for h in others] == [1, 1, 1]
    assert side.llen("side:o:started") == 6 and side.llen("side:o") == 3
    first, second = side.lrange("side:o:started", 0, 2), side.lrange("side:o:started", 3, 5)
    assert len(set(first)) == len(set(second)) == 1 and first != second  # run again in a new child


def test_abort_cancels_a_running_async_job(start_worker, producer, side) -> None:
    start_worker("-c", "1")
    handle = producer.send("asyncapp.abortable", "a")
    wait_for(lambda: side.llen("side:a:started"), 20, "the job to start")
    assert handle.abort()
    assert final(handle) is JobState.CANCELLED
    wait_for(lambda: side.get("side:a:cancelled"), 10, "the task to see CancelledError")
    assert final(producer.send("asyncapp.nap", 0, "after")) is JobState.SUCCEEDED
    assert side.lrange("side:after", 0, -1) == side.lrange("side:a:started", 0, -1)  # cancelled, not killed


def test_sync_and_async_tasks_run_side_by_side_in_one_child(start_worker, producer, side) -> None:
    start_worker("-c", "1", "-t", "2")
    handles = [producer.send(name, "w") for _ in range(10) for name in ("asyncapp.where", "asyncapp.awhere")]
    assert {final(h) for h in handles} == {JobState.SUCCEEDED}
    seen = [x.decode().split() for x in side.lrange("side:w", 0, -1)]
    assert sorted(kind for kind, _ in seen) == ["async"] * 10 + ["sync"] * 10
    assert len({pid for _, pid in seen}) == 1


def test_a_high_priority_async_job_is_not_stuck_behind_low_ones(start_worker, producer, side) -> None:
    ordered = producer.task(name="asyncapp.ordered", priority="low")(lambda key, n: None)
    start_worker("-c", "1", "--async", "2")
    for n in range(12):
        ordered.delay("q", n)
    wait_for(lambda: side.llen("side:q") >= 2, 20, "the first low jobs to start")
    high = ordered.with_options(priority="high").delay("q", "high")
    started = side.llen("side:q")  # the low jobs started by the time it was stored, at most
    assert final(high) is JobState.SUCCEEDED
    order = [x.decode() for x in side.lrange("side:q", 0, -1)]
    # Two slots: the high job takes the first one to free up, not the 13th (on a loaded
    # machine more than two low jobs may have started before it was stored).
    assert order.index("high") <= started + 2, (started, order)


def test_current_job_names_each_async_job_among_many(start_worker, producer) -> None:
    start_worker("-c", "1")
    handles = [producer.send("asyncapp.whoami") for _ in range(20)]
    results = [h.result(timeout=30) for h in handles]
    assert [r[:2] for r in results] == [[h.id, h.id] for h in handles]
    assert {r[2] for r in results} == {1}


def test_an_async_task_in_a_workflow_chain(start_worker, producer) -> None:
    add = producer.task(name="asyncapp.add")(lambda x, y: None)
    double = producer.task(name="asyncapp.double")(lambda x: None)
    start_worker("-c", "1")
    flow = chain(add.s(1, 2), double.s(), add.s(10)).delay()
    assert flow.result(timeout=30) == 16
    assert [step.state for step in flow.info().steps] == [JobState.SUCCEEDED] * 3


def test_sigterm_lets_running_async_jobs_finish(start_worker, producer, side) -> None:
    worker = start_worker("-c", "1")
    handles = [producer.send("asyncapp.nap", 2, "g") for _ in range(5)]
    wait_for(lambda: side.llen("side:g:started") == 5, 20, "the jobs to start")
    worker.signal(signal.SIGTERM)
    assert worker.wait(30) == 0
    assert [h.status() for h in handles] == [JobState.SUCCEEDED] * 5
    assert [h.info().attempts for h in handles] == [1] * 5


def test_burst_mode_runs_the_sync_jobs_of_an_app_with_async_tasks(start_worker, producer, side) -> None:
    """At start the loop's claimer and the lane race for the one job: whoever wins, the lane runs it, the worker ends.

    The loop's claimer gives a sync job back for a lane; a lane that looked
    meanwhile found the queue empty, and in burst mode must not end on that.
    """
    for n in range(8):
        handle = producer.send("asyncapp.where", f"burst{n}")
        worker = start_worker("-c", "1", "--burst")
        assert worker.wait(30) == 0, worker.output()
        assert handle.status() is JobState.SUCCEEDED, worker.output()
