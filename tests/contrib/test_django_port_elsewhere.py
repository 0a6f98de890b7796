"""The ported Django and django-tasks tests, from a Python too old for Django 6: run in ``TASKFORGE_DJANGO_PYTHON``.

``tests/contrib/django_port/`` holds Django's own ``tests/tasks/`` and
django-tasks' backend tests, ported onto ``TaskforgeBackend``; below Python
3.12 they are not collected (``tests/contrib/conftest.py``), so this runs
them under the Python ``.ci/run`` points ``TASKFORGE_DJANGO_PYTHON`` at and
asserts that none failed and that every one skipped is a documented
difference (docs/tutorials/django.md lists them).
"""

from __future__ import annotations

import os
import re

import pytest

from tests.conftest import run_other_pytest, skip_or_fail

pytestmark = [pytest.mark.redis, pytest.mark.slow, pytest.mark.long]


@pytest.mark.timeout(900)
def test_the_ported_django_tests_pass_under_a_python_that_has_django() -> None:
    python = os.environ.get("TASKFORGE_DJANGO_PYTHON")
    if not python:
        skip_or_fail("TASKFORGE_DJANGO_PYTHON is not set: no Python 3.12+ with Django to run tests/contrib/django_port")
    run = run_other_pytest(
        python, ["-q", "-rs", "-p", "no:cacheprovider", "tests/contrib/django_port"], database=1, timeout=840
    )
    assert run.returncode == 0, f"{run.stdout}\n{run.stderr}"
    lines = run.stdout.strip().splitlines()
    summary = lines[-1]
    assert re.search(r"\b\d+ passed\b", summary), summary
    assert not re.search(r"\b\d+ (failed|errors?|xpassed)\b", summary), summary  # "29 xfailed" is not a failure
    skips = [line for line in lines if line.startswith("SKIPPED")]
    undocumented = [line for line in skips if "documented difference: " not in line]
    assert not undocumented, "\n".join(undocumented)
