"""Durable steps, sleeps and streams with real workers: a child killed inside a step, a sleep that frees the
child, a run overtaken after its lease ran out, a reader in another process."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from taskforge import JobState
from tests.conftest import admin_url

from .conftest import final, wait_for

pytestmark = [pytest.mark.redis, pytest.mark.slow]


def test_a_child_killed_inside_step_two_never_runs_step_one_again(start_worker, producer, side) -> None:
    start_worker("-c", "1")
    handle = producer.send("userapp.stepwise", "s")
    assert final(handle) is JobState.SUCCEEDED
    info = handle.info()
    assert info.result == ["first", "second"] and (info.attempts, info.losses) == (1, 1)
    assert side.get("side:s:one") == b"1"  # step one ran in the first run only
    assert side.get("side:s:two") == b"2"  # step two: killed inside, then run again
    assert info.steps == {"one": "first", "two": "second"}


def test_sleep_frees_a_one_child_worker_and_resumes_with_steps_and_attempts(start_worker, producer, side) -> None:
    start_worker("-c", "1")
    napping = producer.send("userapp.napper", "n", 2.0)
    wait_for(lambda: napping.status() is JobState.SCHEDULED, 20, "the job to go to sleep")
    slept_at = time.time()
    other = producer.send("userapp.record", "other")
    assert final(other) is JobState.SUCCEEDED  # the only child is free meanwhile
    assert napping.status() is JobState.SCHEDULED
    assert final(napping) is JobState.SUCCEEDED
    info = napping.info()
    assert info.result == [1, "after"] and info.attempts == 1 and info.steps == {"before": 1, "after": "after"}
    assert side.get("side:n:before") == b"1"
    [woke] = side.lrange("side:n:woke", 0, -1)
    assert float(woke) >= slept_at + 1.0  # not before its time (2 s from the sleep, less the wait's poll)


def test_a_run_whose_lease_was_lost_can_store_no_step_and_no_stream_item(start_worker, producer, side) -> None:
    first = start_worker("-c", "1", "--visibility-timeout", "2")
    handle = producer.send("userapp.fenced_steps", "f")
    wait_for(lambda: side.exists("side:f:waiting"), 30, "the first run to finish step one")
    os.killpg(first.pgid, signal.SIGSTOP)  # its leases run out; the second worker reclaims and runs the job
    try:
        start_worker("-c", "1")
        assert final(handle, 60) is JobState.SUCCEEDED
    finally:
        side.set("side:f:go", 1)
        os.killpg(first.pgid, signal.SIGCONT)
    assert wait_for(lambda: side.get("side:f:refused"), 30, "the first run to be refused") == b"stream step"
    info = handle.info()
    assert info.result == [1, 2] and side.get("side:f:one") == b"1"
    assert info.steps == {"one": 1, "two of run 2": ""} and info.stream_length == 1
    assert list(handle.stream(timeout=5)) == ["run 2"]


READER = """
import sys

import redis

from taskforge import TaskForge

url, side_url, job_id = sys.argv[1], sys.argv[2], sys.argv[3]
side = redis.Redis.from_url(side_url)
app = TaskForge("reader", broker=url)
for item in app.job(job_id).stream(timeout=30):
    side.rpush("side:r:items", item["n"])
    side.set("side:r:seen", item["n"] + 1)
"""


def test_a_reader_in_another_process_sees_every_item_while_the_job_runs(
    start_worker, producer, side, redis_url, tmp_path, workdir
) -> None:
    start_worker("-c", "1")
    handle = producer.send("userapp.narrator", "r", 450)  # more than one read's worth
    reader = tmp_path / "reader.py"
    reader.write_text(READER)
    # the job writes item n only once this reader has item n-1: it reads them while the job runs
    done = subprocess.run(
        [sys.executable, str(reader), redis_url, admin_url(redis_url), handle.id], timeout=90, capture_output=True
    )
    assert done.returncode == 0, done.stderr.decode()
    assert [int(n) for n in side.lrange("side:r:items", 0, -1)] == list(range(450))
    assert final(handle) is JobState.SUCCEEDED and handle.info().stream_length == 450
    late = [item["n"] for item in handle.stream(timeout=5)]  # a late reader: all of them, from the first
    assert late == list(range(450))

    async def late_async() -> list[int]:
        return [item["n"] async for item in handle.astream(timeout=5)]

    assert asyncio.run(late_async()) == list(range(450))
    env = {**os.environ, "TASKFORGE_BROKER_URL": redis_url, "SIDE_REDIS": admin_url(redis_url)}
    text, as_json = (
        subprocess.run(
            [sys.executable, "-m", "taskforge", "job", "userapp:app", handle.id, *extra],
            cwd=workdir,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        for extra in ([], ["--json"])
    )
    assert as_json.returncode == 0 and json.loads(as_json.stdout)["stream_length"] == 450, as_json.stderr
    assert "450 items" in text.stdout, text.stdout + text.stderr
