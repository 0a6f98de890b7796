"""The reconciler's audit: what Redis itself lost (a failover with asynchronous replication) is taken up again.

The outbox covers a crashed worker; these cases are the writes an outbox
cannot cover: a report counted nowhere yet dropped from its outbox, a next
step never stored, a workflow that ended but is still listed as running.
Each is set up by hand on the broker, then one audit pass must repair it.
"""

from __future__ import annotations

import pytest

from taskforge import TaskForge, chain
from taskforge.broker.keys import QueueKeys, workflow_index
from taskforge.broker.workflows import StepReport
from taskforge.serialization import dumps_result
from taskforge.worker import reconcile
from taskforge.workflows.delivery import step_id
from tests.conftest import inspector


@pytest.fixture
def flows(broker_url: str, monkeypatch: pytest.MonkeyPatch) -> TaskForge:
    monkeypatch.setattr(reconcile, "AUDIT_AGE_MS", -60_000)  # every workflow is old enough to audit
    app = TaskForge("audit", broker=broker_url)

    @app.task(name="audit.add")
    def add(x: int, y: int) -> int:
        return x + y

    return app


def first_step_done_unreported(app: TaskForge) -> tuple[str, str]:
    """A chain whose first step succeeded and whose report then vanished with its outbox entry."""
    add = app.tasks["audit.add"]
    flow = chain(add.s(1, 2), add.s(10)).delay()
    queue = add.queue
    [claim], _ = app.broker.claims.dequeue(queue, 60_000)
    assert app.broker.claims.succeed(queue, claim.id, claim.token, dumps_result(3))
    app.broker.client.hdel(QueueKeys(queue).outbox, claim.id)
    return flow.id, queue


def test_a_report_lost_after_its_outbox_entry_is_delivered_again(flows: TaskForge) -> None:
    workflow, _ = first_step_done_unreported(flows)
    reconciler = reconcile.Reconciler(flows.broker, [flows.tasks["audit.add"].queue])
    assert reconciler.run() == 0  # the outbox is empty: only the audit can see it
    assert reconciler.audit() == 1
    flows.drain()
    assert flows.workflow(workflow).result(timeout=5) == 13


def test_a_next_step_never_stored_is_sent_again(flows: TaskForge) -> None:
    workflow, queue = first_step_done_unreported(flows)
    # The report reached the workflow, but the step it freed was never stored.
    flows.broker.ledger.report_steps([StepReport(queue, step_id(workflow, 0), workflow, 0, "succeeded", b"\x03")])
    assert flows.broker.jobs.read(queue, step_id(workflow, 1)) is None
    assert reconcile.Reconciler(flows.broker, [queue]).audit() == 1
    flows.drain()
    assert flows.workflow(workflow).result(timeout=5) == 13


def test_an_ended_workflow_still_listed_as_running_is_settled(flows: TaskForge) -> None:
    add = flows.tasks["audit.add"]
    done = chain(add.s(1, 2), add.s(10)).delay()
    flows.drain()
    assert done.result(timeout=5) == 13
    client = inspector(flows)
    client.zadd(workflow_index("running"), {done.id: 1})  # as if its settling was lost
    assert reconcile.Reconciler(flows.broker, [add.queue]).audit() == 1
    assert client.zscore(workflow_index("running"), done.id) is None
    assert client.zscore(workflow_index("succeeded"), done.id) is not None


def test_a_healthy_running_workflow_is_left_alone(flows: TaskForge) -> None:
    add = flows.tasks["audit.add"]
    running = chain(add.s(1, 2), add.s(10)).delay()
    assert reconcile.Reconciler(flows.broker, [add.queue]).audit() == 0
    flows.drain()
    assert running.result(timeout=5) == 13
