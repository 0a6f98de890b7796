"""What the ported tests share: their TASKS settings, waiting on a real worker, and the marks of known gaps.

The originals ran tasks in the test process (Django's ImmediateBackend) or
with a worker run in-process (django-tasks' ``db_worker``, RQ's
``SimpleWorker``); here a real ``taskforge worker`` runs them, so where the
original read a result at once, the port waits for the worker to finish it
(``finished``), and where it captured the worker's log lines, the port reads
the worker's log (``worker_lines``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.worker.conftest import Worker

ROOT = Path(__file__).resolve().parents[3]
SETTINGS = "tests.contrib.django_port.settings"
BACKEND = "taskforge.contrib.django.TaskforgeBackend"
SERVED = ("default", "queue_1", "queue-1")  # what the package's worker serves; "unserved" is not
WORKER: Worker | None = None


def tasks_setting(queues: list[str] | None = None, **aliases: dict[str, Any]) -> dict[str, Any]:
    """``TASKS`` with ``TaskforgeBackend`` on the test Redis as ``default`` (and other aliases as given)."""
    from tests.conftest import REDIS_URL

    default = {"BACKEND": BACKEND, "QUEUES": [] if queues is None else queues, "OPTIONS": {"BROKER": REDIS_URL}}
    return {"default": default, **aliases}


def finished(result: Any, timeout: float = 30) -> Any:
    """Refresh ``result`` until the worker has finished it (the original backends finished it at once)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result.refresh()
        if result.is_finished:
            return result
        time.sleep(0.05)
    raise AssertionError(f"the worker did not finish {result.id} in {timeout} s:\n{worker_log()[-3000:]}")


def worker_log() -> str:
    assert WORKER is not None, "the package's taskforge_worker fixture did not start"
    return WORKER.output()


def worker_lines(result_id: str, timeout: float = 3, at_least: int = 1) -> list[str]:
    """The worker's Django log lines about one task result (Django's own receivers write them)."""
    deadline = time.monotonic() + timeout
    lines: list[str] = []
    while time.monotonic() < deadline:
        lines = [line for line in worker_log().splitlines() if f"id={result_id}" in line]
        if len(lines) >= at_least:
            break
        time.sleep(0.05)
    return lines


def pending(item: int, what: str) -> pytest.MarkDecorator:
    """A test that fails until issue 31's item ``item`` is fixed (on the Django backend branch)."""
    return pytest.mark.xfail(strict=True, reason=f"issue 31 item {item}: fixed on the Django backend branch ({what})")


def documented_differences() -> str:
    """The Django page's table of what the ported tests do not hold to, and why."""
    text = (ROOT / "docs" / "tutorials" / "django.md").read_text(encoding="utf-8")
    start = text.index("## Differences from Django's contract")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def difference(reason: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A documented difference from Django's contract: the original test cannot hold here, so in its
    place runs a test that the Django page's table of differences names it (none skipped; a row dropped fails)."""

    def documented(original: Callable[..., Any]) -> Callable[..., Any]:
        name = original.__name__

        def test(self: Any) -> None:
            rows = [row for row in documented_differences().splitlines() if f"{name}`" in row]
            assert rows, f"{name} ({reason}) is not in the Django page's differences from Django"

        test.__name__ = test.__qualname__ = name
        test.__doc__ = f"Documented difference: {reason}"
        return test

    return documented


def fresh_queue() -> str:
    """A queue of one test's own, which no other worker serves: parallel runs on one Redis stay apart."""
    import uuid

    return f"port-{uuid.uuid4().hex[:12]}"


def worker_command(*args: str) -> list[str]:
    """``taskforge worker`` for the Django backend's app, as a user runs it."""
    import sys

    return [sys.executable, "-m", "taskforge", "worker", "taskforge.contrib.django:app", *args]


def worker_env(**extra: str) -> dict[str, str]:
    """The environment of a worker process: this package's settings, the project importable."""
    import os

    from tests.conftest import REDIS_URL

    pythonpath = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env = {"DJANGO_SETTINGS_MODULE": SETTINGS, "PYTHONPATH": pythonpath, "TASKFORGE_TEST_REDIS": REDIS_URL}
    return {**os.environ, "PYTHONUNBUFFERED": "1", **env, **extra}


def run_burst(*queues: str, timeout: float = 90, **env: str) -> Any:
    """A real ``taskforge worker --burst`` on ``queues`` (none: the worker's default), run to its exit."""
    import subprocess

    args = ["--burst", "-c", "1", *[arg for queue in queues for arg in ("-q", queue)]]
    return subprocess.run(
        worker_command(*args), cwd=ROOT, env=worker_env(**env), capture_output=True, text=True, timeout=timeout
    )
