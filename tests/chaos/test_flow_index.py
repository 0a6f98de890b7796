"""What the chaos run found in the index of workflows, reproduced without faults.

Under ``redis_restart``, a ``delay()`` can fail between ``create_workflow``'s
two round trips: the "launching" and "running" index entries are stored, the
record is not. The reconciler drops the launching mark 30 s later (its
``workflow_flight`` answers "gone"), but nothing drops the running entry:
the workflow is listed running forever, though it does not exist.
"""

from __future__ import annotations

import time

import pytest
import redis

from taskforge import BrokerUnavailable, TaskForge, WorkflowNotFound, chain
from taskforge.broker.keys import WORKFLOW_LAUNCHING
from taskforge.worker.reconcile import LAUNCH_GRACE_MS, Reconciler


def test_a_workflow_never_stored_is_not_listed_running_once_the_reconciler_looked(
    broker_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = TaskForge("ghost", broker=broker_url)

    @app.task
    def add(x: int, y: int) -> int:
        return x + y

    scripts = app.broker.scripts
    real_run = scripts.run

    def redis_gone_before_the_record(call):  # type: ignore[no-untyped-def]
        if call.name == "workflow_create":
            raise redis.ConnectionError("Connection refused")
        return real_run(call)

    monkeypatch.setattr(scripts, "run", redis_gone_before_the_record)
    with pytest.raises(BrokerUnavailable):
        chain(add.s(1, 2), add.s(3)).delay()
    monkeypatch.undo()
    [ghost] = app.broker.ledger.workflow_ids("running")
    with pytest.raises(WorkflowNotFound):
        app.workflow(ghost).status()
    # As if the launch grace had passed since: the reconciler looks at it now.
    app.broker.client.zadd(WORKFLOW_LAUNCHING, {ghost: int(time.time() * 1000) - 2 * LAUNCH_GRACE_MS})
    Reconciler(app.broker, ["default"]).run()
    assert app.broker.ledger.launching_since(int(time.time() * 1000)) == []
    assert app.broker.ledger.workflow_ids("running") == []
    assert app.broker.ledger.workflow_counts()["running"] == 0
