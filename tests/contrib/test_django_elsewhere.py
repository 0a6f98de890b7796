"""The Django tests, from a Python too old for Django 6: run in ``TASKFORGE_DJANGO_PYTHON``, asserted here.

``.ci/run`` points ``TASKFORGE_DJANGO_PYTHON`` at its Python 3.13 venv, which
has the project and Django installed, so the documented one test command runs
every test, Django's included, and none is skipped under CI.
"""

from __future__ import annotations

import os
import re

import pytest

from tests.conftest import run_other_pytest, skip_or_fail

pytestmark = [pytest.mark.redis, pytest.mark.slow, pytest.mark.long]


# Past the run's own 300 s: the suite's 120 s would end this xdist worker (a "crash") when
# the Django tests, 40 s alone, run beside the chaos test at the start of a loaded suite.
@pytest.mark.timeout(360)
def test_the_django_tests_pass_under_a_python_that_has_django() -> None:
    python = os.environ.get("TASKFORGE_DJANGO_PYTHON")
    if not python:
        skip_or_fail(
            "TASKFORGE_DJANGO_PYTHON is not set: no Python 3.12+ with Django to run tests/contrib/test_django.py"
        )
    run = run_other_pytest(
        python, ["-q", "-p", "no:cacheprovider", "tests/contrib/test_django.py"], database=0, timeout=300
    )
    assert run.returncode == 0, f"{run.stdout}\n{run.stderr}"
    summary = run.stdout.strip().splitlines()[-1]
    assert re.search(r"\b\d+ passed\b", summary) and "skipped" not in summary, summary
