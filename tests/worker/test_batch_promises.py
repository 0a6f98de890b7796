"""Two promises of "Throughput: the worker's batches", checked with real workers on a real Redis.

A run longer than 5 ms is recorded before the next job of its batch starts,
so a job that reads the one before it finds it succeeded. And a worker
killed whole (supervisor and children, nothing left to say which job it had
started) gives back the jobs of its batch it never started uncharged: each
runs as its first attempt, a ``max_attempts=1`` one too, while the job it
was running is charged as always.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
import redis

from taskforge import JobState, TaskForge

from .conftest import final, wait_for

pytestmark = [pytest.mark.redis, pytest.mark.slow]

APP = '''
import os
import time

import redis

from taskforge import TaskForge, current_job

app = TaskForge("batchapp")
side = redis.Redis.from_url(os.environ["SIDE_REDIS"])


@app.task
def quick(n):
    return n


@app.task
def link(n, previous, seconds):
    """Says, as it starts, the state the job before it in line is recorded in."""
    state = app.job(previous).status().value if previous else "-"
    side.rpush("side:links", f"{n} {state}")
    time.sleep(seconds)
    return n


@app.task(max_attempts=3)
def hold(name):
    """Its first run waits to be killed with its worker; a later one ends at once (runs counted here:
    a run lost with its worker uses no attempt, so the next one is attempt 1 again)."""
    run = side.incr(f"side:{name}:runs")
    side.rpush("side:runs", f"{name} {run}")
    if run == 1:
        time.sleep(60)
    return name


@app.task(max_attempts=1)
def once(name):
    side.rpush("side:runs", f"{name} {current_job().attempt}")
    return name


@app.task(max_attempts=3)
def thrice(name):
    side.rpush("side:runs", f"{name} {current_job().attempt}")
    return name
'''


@pytest.fixture
def batchapp(workdir: Path) -> str:
    (workdir / "batchapp.py").write_text(APP)
    return "batchapp:app"


@pytest.mark.parametrize("prefetch", ["16", "auto"])
def test_a_long_run_is_recorded_before_the_next_job_of_its_batch_starts(
    start_worker, producer: TaskForge, side: redis.Redis, batchapp: str, prefetch: str
) -> None:
    # auto claims more than one job only while runs are short: quick jobs first grow its batches.
    quick = [producer.send("batchapp.quick", n) for n in range(300 if prefetch == "auto" else 0)]
    links, previous = [], None
    for n in range(12):
        handle = producer.send("batchapp.link", n, previous, 0.02)
        links.append(handle)
        previous = handle.id
    start_worker("-c", "1", "--prefetch", prefetch, app=batchapp)
    assert [final(h) for h in links] == [JobState.SUCCEEDED] * 12
    seen = [entry.decode() for entry in side.lrange("side:links", 0, -1)]
    assert seen == ["0 -"] + [f"{n} succeeded" for n in range(1, 12)]
    assert all(final(h) is JobState.SUCCEEDED for h in quick)
    if prefetch == "16":  # claimed together: the promise is about a batch's jobs
        tokens = {producer.broker.claims.job_fields("default", h.id, ["outcome_token"])[0] for h in links}
        assert len(tokens) == 1


def runs(side: redis.Redis) -> list[str]:
    return [entry.decode() for entry in side.lrange("side:runs", 0, -1)]


@pytest.mark.parametrize("taken_back_by", ["a worker started on the same host", "another worker's reclaim"])
def test_a_worker_killed_whole_gives_back_the_jobs_of_its_batch_it_never_started_uncharged(
    start_worker, producer: TaskForge, side: redis.Redis, batchapp: str, taken_back_by: str
) -> None:
    held = producer.send("batchapp.hold", "held")
    onces = [producer.send("batchapp.once", f"once{n}") for n in range(4)]
    thrices = [producer.send("batchapp.thrice", f"thrice{n}") for n in range(3)]
    lease = ["--visibility-timeout", "2"] if taken_back_by == "another worker's reclaim" else []
    first = start_worker("-c", "1", "--prefetch", "16", *lease, app=batchapp)
    wait_for(lambda: runs(side) == ["held 1"], 30, "the first job of the batch to start")
    claimed = [h.status() for h in (*onces, *thrices)]
    assert claimed == [JobState.RUNNING] * 7, claimed  # claimed with it, in its batch
    os.killpg(first.pgid, signal.SIGKILL)
    first.wait(10)
    if taken_back_by == "another worker's reclaim":
        time.sleep(2.5)  # the leases ran out; a worker of another host reclaims what nobody renews
        back, buried, _ = producer.broker.claims.reclaim("default")
        assert sorted(back) == sorted(h.id for h in (held, *onces, *thrices)) and buried == []
        states = [h.info() for h in (held, *onces, *thrices)]
        assert [(i.state, i.attempts, i.losses) for i in states] == [(JobState.PENDING, 0, 1)] + [
            (JobState.PENDING, 0, 0)
        ] * 7
    start_worker("-c", "1", "--prefetch", "16", app=batchapp)
    assert [final(h) for h in (held, *onces, *thrices)] == [JobState.SUCCEEDED] * 8
    # The job it was running lost a run with its worker: a loss, not an attempt (its second run is attempt 1
    # again); the others never started, count nothing, and ran once, as attempt 1.
    infos = [h.info() for h in (held, *onces, *thrices)]
    assert [(i.attempts, i.losses) for i in infos] == [(1, 1)] + [(1, 0)] * 7
    assert sorted(runs(side)) == sorted(
        ["held 1", "held 2", *(f"once{n} 1" for n in range(4)), *(f"thrice{n} 1" for n in range(3))]
    )
