"""A worker meets workflows only through the seam they install (``taskforge/workflow_seam.py``).

The worker never imports ``taskforge.workflows`` (``tests/test_layers.py``);
these check that it still runs workflows: a real worker, whose user app never
names workflows, runs a chain sent by another process, and a worker started
where nothing installed the seam fails at once, saying what is missing,
rather than leaving steps undelivered.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from taskforge import TaskForge, WorkflowState, chain

from .conftest import wait_for

WITHOUT_WORKFLOWS = """
import sys
from taskforge.worker.reconcile import Reconciler
assert not any(name.startswith("taskforge.workflows") for name in sys.modules), sorted(sys.modules)
try:
    Reconciler(None, [])
except RuntimeError as exc:
    print(exc)
"""


@pytest.mark.redis
def test_a_worker_whose_app_never_names_workflows_runs_a_chain(start_worker, producer: TaskForge, side) -> None:
    """userapp.py imports only ``TaskForge``: the app installs the seam, so the child's courier
    carries step one's report and the next step is sent."""

    @producer.task(name="userapp.record")
    def record(key: str, value: int = 1) -> int:
        raise AssertionError("run by the worker only")

    start_worker("-c", "1")
    handle = chain(record.si("seam", 1), record.si("seam", 2), record.si("seam", 3)).delay()
    assert handle.result(timeout=30) == 3
    assert handle.status() is WorkflowState.SUCCEEDED
    assert side.lrange("side:seam", 0, -1) == [b"1", b"2", b"3"]
    wait_for(lambda: not producer.broker.ledger.outbox("default"), 10, "the reports dropped from the outbox")


def test_a_worker_without_the_seam_fails_when_it_starts_naming_the_fix() -> None:
    done = subprocess.run([sys.executable, "-c", WITHOUT_WORKFLOWS], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "no workflows on the worker's seam: import taskforge.workflows.reports" in done.stdout
