"""The ported Django and django-tasks tests, from a Python too old for Django 6: run in ``TASKFORGE_DJANGO_PYTHON``.

``tests/contrib/django_port/`` holds Django's own ``tests/tasks/`` and
django-tasks' backend tests, ported onto ``TaskforgeBackend``; below Python
3.12 they are not collected (``tests/contrib/conftest.py``), so this runs
them under the Python ``.ci/run`` points ``TASKFORGE_DJANGO_PYTHON`` at and
asserts that none failed and that every one skipped is a documented
difference (the README's Django section lists them).
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


@pytest.mark.timeout(900)
def test_the_ported_django_tests_pass_under_a_python_that_has_django() -> None:
    python = os.environ.get("TASKFORGE_DJANGO_PYTHON")
    if not python:
        skip_or_fail("TASKFORGE_DJANGO_PYTHON is not set: no Python 3.12+ with Django to run tests/contrib/django_port")
    command = [python, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "tests/contrib/django_port"]
    url = spare_redis_url(1)  # a database of its own: its workers never meet another test's jobs
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
        timeout=840,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    assert run.returncode == 0, f"{run.stdout}\n{run.stderr}"
    lines = run.stdout.strip().splitlines()
    summary = lines[-1]
    assert re.search(r"\b\d+ passed\b", summary), summary
    assert not re.search(r"\b\d+ (failed|errors?|xpassed)\b", summary), summary  # "29 xfailed" is not a failure
    skips = [line for line in lines if line.startswith("SKIPPED")]
    undocumented = [line for line in skips if "documented difference: " not in line]
    assert not undocumented, "\n".join(undocumented)
