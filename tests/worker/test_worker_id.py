"""``current_job().worker_id``: the worker a job runs on, as ``taskforge status`` lists it."""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from pathlib import Path

import pytest

from taskforge import TaskForge, current_job
from taskforge.status import workers
from tests.worker.conftest import Worker, wait_for

pytestmark = [pytest.mark.redis, pytest.mark.slow]

APP = """
from taskforge import TaskForge, current_job

app = TaskForge("whoapp")


@app.task
def who() -> str:
    return current_job().worker_id
"""


def test_a_job_names_the_worker_that_runs_it(
    workdir: Path, redis_url: str, start_worker: Callable[..., Worker]
) -> None:
    (workdir / "whoapp.py").write_text(APP)
    worker = start_worker("-c", "1", app="whoapp:app")
    app = TaskForge("whoapp", broker=redis_url)
    [listed] = wait_for(lambda: workers(app), 30, "the worker's registry entry")
    assert app.send("whoapp.who").result(timeout=30) == listed.id
    assert listed.id.startswith(f"{socket.gethostname()}:{worker.pid}:")


def test_outside_a_worker_it_is_the_host_and_pid(app: TaskForge) -> None:
    @app.task
    def who() -> str:
        return current_job().worker_id

    handle = who.delay()
    app.drain()
    assert handle.result(timeout=1) == f"{socket.gethostname()}:{os.getpid()}"
