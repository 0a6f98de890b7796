"""Periodic ticks, unique jobs, global limits and abort, across real worker processes."""

from __future__ import annotations

import multiprocessing
import signal
import time

import pytest

from taskforge import JobState
from tests.conftest import admin_client, admin_url, inspector

from .conftest import wait_for

pytestmark = [pytest.mark.redis, pytest.mark.slow]
FEATURES = "featureapp:app"


@pytest.fixture
def features(redis_url: str, workdir, monkeypatch):
    """The feature app's module, imported here as a producer would, bound to the test Redis."""
    import importlib
    import sys

    monkeypatch.syspath_prepend(str(workdir))
    monkeypatch.setenv("TASKFORGE_BROKER_URL", redis_url)
    monkeypatch.setenv("SIDE_REDIS", redis_url)
    sys.modules.pop("featureapp", None)
    module = importlib.import_module("featureapp")
    yield module
    sys.modules.pop("featureapp", None)


def test_each_periodic_tick_is_enqueued_once_by_three_workers(start_worker, side, redis_url) -> None:
    workers = [start_worker("-c", "1", app=FEATURES) for _ in range(3)]
    wait_for(lambda: side.llen("side:ticks") >= 22, 60, "22 ticks to run", interval=0.2)
    for worker in workers:
        worker.signal(signal.SIGTERM)
    for worker in workers:
        assert worker.wait(30) == 0
    runs = [r.decode() for r in side.lrange("side:ticks", 0, -1)]
    client = admin_client(redis_url)
    ticks = {
        int(k.decode().rsplit(":", 1)[1]): client.get(k).decode()
        for k in client.scan_iter("taskforge:{default}:tick:featureapp.every_second:*")
    }
    assert len(runs) == len(set(runs)), "a tick's job ran twice"
    assert set(runs) <= set(ticks.values()), "a job ran that no tick enqueued"
    seconds = sorted(ms // 1000 for ms in ticks)
    assert len(seconds) >= 20
    assert seconds == list(range(seconds[0], seconds[0] + len(seconds))), "a tick was skipped or doubled"


def _enqueue_unique(workdir: str, url: str, barrier, out) -> None:
    import os
    import sys

    os.environ["TASKFORGE_BROKER_URL"], os.environ["SIDE_REDIS"] = url, admin_url(url)
    sys.path.insert(0, workdir)
    import featureapp

    barrier.wait()
    out.put([featureapp.unique_once.delay("u").id for _ in range(25)])


def test_unique_job_enqueued_100_times_from_4_processes_runs_once(start_worker, side, redis_url, workdir) -> None:
    ctx = multiprocessing.get_context("spawn")
    barrier, out = ctx.Barrier(4), ctx.Queue()
    procs = [ctx.Process(target=_enqueue_unique, args=(str(workdir), redis_url, barrier, out)) for _ in range(4)]
    for p in procs:
        p.start()
    ids = [job_id for _ in procs for job_id in out.get(timeout=60)]
    for p in procs:
        p.join(30)
    assert len(ids) == 100 and len(set(ids)) == 1
    worker = start_worker("-c", "2", "--burst", "-q", "default", "--no-periodic", app=FEATURES)
    assert worker.wait(60) == 0
    assert side.lrange("side:u", 0, -1) == [ids[0].encode()]


def test_unique_lock_of_a_killed_worker_lasts_only_its_ttl(start_worker, side, features) -> None:
    first = features.unique_sleep.delay("k", 60)
    worker = start_worker("-c", "1", "--visibility-timeout", "30", "--no-periodic", app=FEATURES)
    wait_for(lambda: side.llen("side:k"), 30, "the unique job to start")
    worker.signal(signal.SIGKILL)
    worker.wait(10)
    client = inspector(features.app)
    [lock] = list(client.scan_iter("taskforge:{default}:unique:*"))
    remaining = client.pttl(lock) / 1000
    assert 0 < remaining <= 8
    if remaining > 0.5:  # locked: as far as Redis knows the job still runs
        assert features.unique_sleep.delay("k", 60).id == first.id
    wait_for(lambda: not client.exists(lock), remaining + 10, "the lock to expire")
    assert features.unique_sleep.delay("k", 60).id != first.id  # the lock expired with its TTL


def test_rate_limit_is_global_and_does_not_block_other_tasks(start_worker, side, features) -> None:
    features.limited.delay_many([("rl",)] * 100)
    workers = [start_worker("-c", "4", "-q", "limited", app=FEATURES) for _ in range(2)]
    wait_for(lambda: side.llen("side:rl"), 30, "the rate-limited jobs to start")
    features.unlimited.delay_many([("free",)] * 20)
    wait_for(lambda: side.llen("side:free") >= 20, 30, "the unlimited jobs to run")
    assert side.llen("side:rl") < 60, "unlimited jobs waited behind the rate-limited ones"
    wait_for(lambda: side.llen("side:rl") >= 100, 60, "100 rate-limited jobs to run", interval=0.2)
    # A start is when the queue handed the job to a child (started_at, Redis's clock): what the
    # limit bounds. The task's own clock adds process scheduling noise on a loaded machine.
    starts = sorted(features.app.job(i.decode()).info().started_at.timestamp() for i in side.lrange("side:rl", 0, -1))
    worst = max(sum(1 for t in starts if s <= t < s + 1.0) for s in starts)
    assert worst <= 10, f"{worst} starts within one second"
    for worker in workers:
        worker.signal(signal.SIGTERM)


def test_concurrency_limit_holds_across_a_crash(start_worker, side, features) -> None:
    features.narrow.delay("c", crash=True)
    features.narrow.delay_many([("c",)] * 11)
    workers = [start_worker("-c", "3", "-q", "limited", app=FEATURES) for _ in range(2)]
    wait_for(lambda: side.llen("side:c:end") >= 12, 60, "12 limited jobs to finish", interval=0.2)
    starts = dict(r.decode().split() for r in side.lrange("side:c:start", 0, -1))
    ends = dict(r.decode().split() for r in side.lrange("side:c:end", 0, -1))
    crashed = set(starts) - set(ends)
    assert len(starts) == 13 and len(crashed) == 1  # one crashed attempt, then its retry
    # Seen from inside every run, including while the crashed one still held its slot:
    assert max(int(n) for n in side.lrange("side:c:active", 0, -1)) <= 2
    # Seen from the runs' own clocks, for the runs that ended:
    events = sorted([(float(starts[r]), 1) for r in ends] + [(float(t), -1) for t in ends.values()])
    running = peak = 0
    for _, delta in events:
        running += delta
        peak = max(peak, running)
    assert peak <= 2, peak
    for worker in workers:
        worker.signal(signal.SIGTERM)


def test_abort_stops_a_running_job_and_the_worker_keeps_serving(start_worker, side, features) -> None:
    worker = start_worker("-c", "1", "--no-periodic", app=FEATURES)
    handle = features.forever.delay("ab")
    wait_for(lambda: side.llen("side:ab"), 30, "the job to start")
    started = time.monotonic()
    assert handle.abort() is True
    wait_for(lambda: handle.status() is JobState.CANCELLED, 10, "the aborted job to be cancelled")
    assert time.monotonic() - started < 5
    assert "Aborted" in handle.info().error
    assert features.unique_once.delay("after-abort").result(timeout=20) is None
    assert worker.proc.poll() is None
    assert not handle.abort()  # finished: nothing to abort
