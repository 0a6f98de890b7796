"""Security fixtures: a private process table (see procs.py) and the app module the commands load."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from .procs import Processes

SEC_APP = """
from datetime import timedelta
from pathlib import Path

from taskforge import TaskForge, current_job

app = TaskForge("secapp")


@app.task(name="touch")
def touch(path):
    Path(path).write_text("ran")
    return "touched"


@app.task(name="echo")
def echo(value):
    return value


@app.task(name="mail", queue="mail")  # a second queue: workers peek at both in one pipeline
def mail(value):
    return value


@app.task(name="limited", rate_limit="100/s", concurrency=2)
def limited(value):
    return value


@app.task(name="once", unique=True)
def once(value):
    return value


@app.task(name="narrated")  # durable steps, a durable sleep and a stream
def narrated(value):
    job = current_job()
    got = job.step("fetch", lambda: value)
    job.sleep(0.2)
    job.stream(got)
    return got


@app.periodic(every=timedelta(seconds=1))
def heartbeat():
    return "tick"
"""


@pytest.fixture
def processes(tmp_path: Path) -> Iterator[Processes]:
    table = Processes(tmp_path)
    try:
        yield table
    finally:
        table.close()


@pytest.fixture
def app_dir(tmp_path: Path) -> Path:
    """A directory holding secapp.py, the app every command of these tests loads (``secapp:app``)."""
    path = tmp_path / "app"
    path.mkdir()
    (path / "secapp.py").write_text(SEC_APP)
    return path
