"""A worker that starts enqueues a periodic task's latest tick, unless the task says ``catch_up=False``."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from .conftest import wait_for

pytestmark = [pytest.mark.redis, pytest.mark.slow]

START_APP = """
import os

import redis

from taskforge import TaskForge

app = TaskForge("startapp")
side = redis.Redis.from_url(os.environ["SIDE_REDIS"])


@app.periodic(every=3600)
def hourly():
    side.rpush("side:start", "hourly")


@app.periodic(every=3600, catch_up=False)
def hourly_on_the_hour():
    side.rpush("side:start", "on_the_hour")
"""


def test_a_periodic_with_catch_up_off_does_not_run_at_worker_start(start_worker, side, workdir: Path) -> None:
    (workdir / "startapp.py").write_text(START_APP)
    start_worker("-c", "1", app="startapp:app")
    wait_for(lambda: side.llen("side:start") >= 1, 30, "the start tick of the hourly task to run")
    time.sleep(1)  # both start ticks are taken in one pass: the other would have run by now
    assert [r.decode() for r in side.lrange("side:start", 0, -1)] == ["hourly"]
