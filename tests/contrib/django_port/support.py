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
from typing import Any

import pytest

from tests.worker.conftest import Worker

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


def worker_lines(result_id: str, timeout: float = 10, at_least: int = 1) -> list[str]:
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


def difference(reason: str) -> pytest.MarkDecorator:
    """A documented difference from Django's contract (README, Django section): skipped with its reason."""
    return pytest.mark.skip(reason=f"documented difference: {reason}")
