"""The Django tests, from a Python too old for Django 6: run in ``TASKFORGE_DJANGO_PYTHON``, asserted here.

``.ci/run`` points ``TASKFORGE_DJANGO_PYTHON`` at its Python 3.13 venv, which
has the project and Django installed, so the README's one test command runs
every test, Django's included, and none is skipped under CI.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
import redis

from tests.conftest import skip_or_fail, spare_redis_url

pytestmark = [pytest.mark.redis, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


def test_the_django_tests_pass_under_a_python_that_has_django() -> None:
    python = os.environ.get("TASKFORGE_DJANGO_PYTHON")
    if not python:
        skip_or_fail(
            "TASKFORGE_DJANGO_PYTHON is not set: no Python 3.12+ with Django to run tests/contrib/test_django.py"
        )
    command = [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/contrib/test_django.py"]
    url = spare_redis_url(0)  # a database of its own: its workers never meet another test's jobs
    redis.Redis.from_url(url).flushdb()
    env = {**os.environ, "TASKFORGE_TEST_REDIS": url}
    # Its own session and no stdin: nothing the other pytest starts can signal this worker's process
    # group or read the channel this xdist worker is driven through (its stdin).
    run = subprocess.run(
        command,
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    assert run.returncode == 0, f"{run.stdout}\n{run.stderr}"
    summary = run.stdout.strip().splitlines()[-1]
    assert re.search(r"\b\d+ passed\b", summary) and "skipped" not in summary, summary
