"""Fair turns and per-key limits with real workers (docs/howto/keys.md).

The producer defines the worker's tasks with the same options (a job's key
and its key's limits are decided where the call is made); the limits are
checked from what Redis recorded: each job's start and end (Redis's clock).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from taskforge import JobState, TaskForge
from taskforge.broker import workers
from tests.conftest import admin_url

from ..intervals import most_at_once
from .conftest import final, wait_for

pytestmark = [pytest.mark.redis, pytest.mark.slow]


def test_one_job_of_a_key_starts_within_a_few_jobs_of_a_key_with_100000(start_worker, redis_url: str, side) -> None:
    producer = TaskForge("producer", broker=redis_url)

    @producer.task(name="userapp.keyed", key="account")
    def keyed(account: str) -> None: ...

    for _ in range(100):  # in slices: one script of 10,000 jobs would stall every other test's Redis for ~0.3 s
        keyed.delay_many([("big",)] * 1_000)
    small = keyed.delay("small")
    assert producer.broker.inspection.counts("default")["pending"] == 100_001
    start_worker("-c", "1")
    assert final(small) is JobState.SUCCEEDED
    order = [k.decode() for k in side.lrange("side:keyed", 0, -1)]
    assert order.index("small") <= 2, order[:20]


def test_key_concurrency_is_never_exceeded_across_two_workers(start_worker, redis_url: str) -> None:
    producer = TaskForge("producer", broker=redis_url)

    @producer.task(name="userapp.keyed_span", key="account", key_concurrency=2)
    def keyed_span(account: str, seconds: float) -> None: ...

    started = [start_worker("-c", "2"), start_worker("-c", "2", "-t", "2")]
    # Both workers up (listed with their two children) before the jobs come: a second worker still
    # starting on a loaded box would leave the first to run every job alone, at most one of a key at once.
    wait_for(
        lambda: (
            {w["pid"] for w in workers.live_workers(producer.broker.client) if len(w["processes"]) >= 3}
            >= {worker.pid for worker in started}
        ),
        60,
        "both workers to list their children",
    )
    handles = {account: [keyed_span.delay(account, 0.3) for _ in range(6)] for account in ("a", "b", "c")}
    for jobs in handles.values():
        assert all(final(h, timeout=60) is JobState.SUCCEEDED for h in jobs)
    peaks = {}
    for account, jobs in handles.items():
        infos = [h.info() for h in jobs]
        assert all(i.attempts == 1 for i in infos)  # held back, never failed or retried
        peaks[account] = most_at_once([(i.started_at.timestamp(), i.finished_at.timestamp()) for i in infos])
    assert max(peaks.values()) == 2, peaks  # the cap is used...
    assert all(peak <= 2 for peak in peaks.values()), peaks  # ...and never exceeded


def test_key_rate_limit_bounds_starts_per_key_while_another_key_runs(start_worker, redis_url: str) -> None:
    producer = TaskForge("producer", broker=redis_url)

    @producer.task(name="userapp.keyed_rated", key="account", key_rate_limit="4/s")
    def keyed_rated(account: str) -> str: ...

    slow = [keyed_rated.delay("busy") for _ in range(12)]
    other = [keyed_rated.delay("other") for _ in range(3)]
    start_worker("-c", "2")
    assert all(final(h) is JobState.SUCCEEDED for h in other)
    other_done = time.time()
    assert all(final(h) is JobState.SUCCEEDED for h in slow)
    starts = sorted(h.info().started_at.timestamp() for h in slow)
    # At most 4 starts of "busy" in any one-second window: 12 need three windows.
    for i in range(len(starts) - 4):
        assert starts[i + 4] - starts[i] >= 1.0 - 0.002, starts
    assert starts[-1] - starts[0] >= 2.0
    # "other" was not held behind "busy": its jobs were done before busy's last window opened.
    assert other_done < starts[-1]
    assert all(h.info().attempts == 1 for h in slow)


def test_held_jobs_show_in_status_and_job_with_the_reason(start_worker, redis_url: str, workdir, side) -> None:
    producer = TaskForge("producer", broker=redis_url)

    @producer.task(name="userapp.keyed_span", key="account", key_concurrency=2)
    def keyed_span(account: str, seconds: float | str) -> None: ...

    # Two runs take the key's two slots until the CLI has looked (however slow under load); two short ones wait.
    jobs = [keyed_span.delay("a", seconds) for seconds in ("side:held-gate", "side:held-gate", 0.1, 0.1)]
    start_worker("-c", "2", "-t", "2")
    wait_for(lambda: producer.broker.flow.held("default") == 2, 15, "two jobs held back")

    def cli(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "taskforge", *args],
            cwd=workdir,
            env={**os.environ, "TASKFORGE_BROKER_URL": redis_url, "SIDE_REDIS": admin_url(redis_url)},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    queue = next(q for q in json.loads(cli("status", "userapp:app", "--json"))["queues"] if q["name"] == "default")
    assert queue["held"] == 2 and queue["pending"] == 2
    held = [h for h in jobs if h.status() is JobState.PENDING]
    assert len(held) == 2
    shown = cli("job", "userapp:app", held[0].id)
    assert "held back" in shown and "key_concurrency=2 reached for key 'a' (2 running)" in shown
    data = json.loads(cli("job", "userapp:app", held[0].id, "--json"))
    assert data["held"] == "key_concurrency=2 reached for key 'a' (2 running)" and data["attempts"] == 0
    side.set("side:held-gate", 1)
    assert all(final(h, timeout=60) is JobState.SUCCEEDED for h in jobs)
