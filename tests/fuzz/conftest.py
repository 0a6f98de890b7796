"""Fuzz fixtures: the worker fixtures of tests/worker (real ``taskforge worker`` subprocesses in
their own process group, orphan check), running the fuzz app below instead of the worker tests' app.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.worker.conftest import side, start_worker  # noqa: F401

# Copied into the worker's directory as userapp.py (the module tests/worker's Worker runs).
FUZZ_APP = '''
import os

import redis

from taskforge import TaskForge

app = TaskForge("fuzzapp")
side = redis.Redis.from_url(os.environ["SIDE_REDIS"])


@app.task(name="noop", queue="fuzz")
def noop(tag=None, *args, **kwargs):
    """Records that it ran (the tag is the job's own id, for jobs seeded by the tests)."""
    if isinstance(tag, str):
        side.rpush("fuzz:ran", tag)


@app.task(name="big_result", queue="fuzz", max_attempts=1)
def big_result(size):
    return b"x" * size


@app.task(name="small_result", queue="fuzz")
def small_result():
    return "fits"
'''


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "userapp.py").write_text(FUZZ_APP)
    return tmp_path
