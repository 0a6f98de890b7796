"""What a crash leaves half done, repaired: a report never delivered, one delivered twice, a launch cut short.

The crashes are simulated at the exact point they would happen: a step is
claimed and recorded by hand (``wf-manual`` is served by no worker) and its
report left in the outbox; a report is delivered twice; a producer's
``send`` fails after the workflow was stored. The worker then runs whatever
the repair sends, so each workflow is shown to complete, and complete once.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import redis

from taskforge import JobState, TaskFailed, TaskForge, WorkflowHandle, WorkflowState, chain
from taskforge.broker.keys import WORKFLOW_LAUNCHING
from taskforge.broker.record import Claim
from taskforge.serialization import dumps_result
from taskforge.worker.reconcile import LAUNCH_GRACE_MS, Reconciler
from taskforge.workflows.delivery import deliver, report_of

from ..worker.conftest import Worker, stop_workers
from .conftest import APP_SPEC, REPO, RESULT_TIMEOUT, Gate, runs, text, wait_for
from .wfapp import MANUAL, add, gated, ident, mark

pytestmark = [pytest.mark.redis]
LEASE_MS = 60_000


def launching(side: redis.Redis) -> set[str]:
    """The workflows marked launching: stored, their first steps not confirmed sent."""
    return {text(member) for member in side.zrange(WORKFLOW_LAUNCHING, 0, -1)}


def claim_first_step(app: TaskForge, h: WorkflowHandle[object]) -> Claim:
    claims, _ = app.broker.claims.dequeue(MANUAL, LEASE_MS)
    assert [c.id for c in claims] == [f"{h.id}.0"]
    assert claims[0].workflow == h.id
    return claims[0]


def succeed_undelivered(app: TaskForge, h: WorkflowHandle[object], value: object) -> Claim:
    """The step's final transition, as a worker that died right after it would leave it."""
    claim = claim_first_step(app, h)
    assert app.broker.claims.succeed(MANUAL, claim.id, claim.token, dumps_result(value))
    assert app.broker.ledger.outbox(MANUAL) == {claim.id: h.id}
    return claim


def test_a_report_never_delivered_is_delivered_by_the_reconciler(
    live_app: TaskForge, side: redis.Redis, token: str
) -> None:
    h = chain(ident.with_options(queue=MANUAL).s(5), mark.s(token)).delay()
    succeed_undelivered(live_app, h, 5)
    assert h.status() is WorkflowState.RUNNING
    assert live_app.broker.jobs.read("wf", f"{h.id}.1") is None

    reconciler = Reconciler(live_app.broker, [MANUAL])
    reconciler.run()  # first sight: the worker may be delivering it right now
    assert f"{h.id}.0" in live_app.broker.ledger.outbox(MANUAL)
    assert live_app.broker.jobs.read("wf", f"{h.id}.1") is None
    assert reconciler.run() >= 1  # seen twice: left behind, delivered
    assert live_app.broker.ledger.outbox(MANUAL) == {}
    assert h.result(timeout=RESULT_TIMEOUT) == 5
    assert runs(side, token) == ["5"]
    assert [s.state for s in h.info().steps] == [JobState.SUCCEEDED] * 2


def test_a_workers_housekeeping_delivers_a_report_left_behind(
    live_app: TaskForge, side: redis.Redis, token: str, module_redis: str, tmp_path: Path
) -> None:
    h = chain(ident.with_options(queue=MANUAL).s(6), mark.s(token)).delay()
    succeed_undelivered(live_app, h, 6)
    # A second worker, on the queue whose outbox holds the report: its supervisor's reclaim duty repairs it.
    helper = Worker(REPO, module_redis, ["-c", "1", "-q", MANUAL], tmp_path / "helper.log", app=APP_SPEC)
    try:
        assert h.result(timeout=RESULT_TIMEOUT) == 6
        wait_for(lambda: not live_app.broker.ledger.outbox(MANUAL), RESULT_TIMEOUT, "the outbox emptied")
    finally:
        stop_workers([helper])
    assert runs(side, token) == ["6"]


def test_a_report_delivered_twice_sends_the_next_step_once(live_app: TaskForge, side: redis.Redis, token: str) -> None:
    h = chain(ident.with_options(queue=MANUAL).s(7), mark.s(token)).delay()
    claim = succeed_undelivered(live_app, h, 7)
    report = report_of(MANUAL, claim.id, h.id, "succeeded", dumps_result(7))
    deliver(live_app.broker, [report])
    assert h.result(timeout=RESULT_TIMEOUT) == 7
    successor = f"{h.id}.1"
    before = live_app.broker.jobs.read("wf", successor)
    assert before is not None and before[b"state"] == b"succeeded"

    deliver(live_app.broker, [report])  # e.g. the reconciler after a delivery whose drop was lost
    assert live_app.broker.jobs.read("wf", successor) == before  # not reset, not queued again
    assert live_app.job(successor).info().attempts == 1
    assert runs(side, token) == ["7"]
    assert h.status() is WorkflowState.SUCCEEDED
    assert live_app.broker.ledger.outbox(MANUAL) == {}


def test_a_dead_report_delivered_twice_runs_on_failure_once(live_app: TaskForge, side: redis.Redis, token: str) -> None:
    h = chain(
        ident.with_options(queue=MANUAL).s(8),
        mark.s(f"{token}-after"),
        on_failure=mark.si("failed", f"{token}-fail"),
    ).delay()
    claim = claim_first_step(live_app, h)
    assert live_app.broker.claims.fail(MANUAL, claim.id, claim.token, "ValueError: by hand", "", None) == "dead"
    report = report_of(MANUAL, claim.id, h.id, "dead", error="ValueError: by hand")
    deliver(live_app.broker, [report])
    on_failure = f"{h.id}.2"
    assert live_app.job(on_failure).result(timeout=RESULT_TIMEOUT) == "failed"
    before = live_app.broker.jobs.read("wf", on_failure)

    deliver(live_app.broker, [report])
    assert live_app.broker.jobs.read("wf", on_failure) == before
    assert runs(side, f"{token}-fail") == ["'failed'"]
    assert runs(side, f"{token}-after") == []
    assert h.status() is WorkflowState.DEAD
    assert h.info().failed_step == claim.id


def test_a_workflow_whose_first_steps_were_never_sent_is_launched_by_the_reconciler(
    live_app: TaskForge, side: redis.Redis, token: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def lost(*args: object) -> None:
        raise redis.ConnectionError("the producer lost Redis after storing the workflow")

    monkeypatch.setattr("taskforge.workflows.launch.sending", lost)
    marked_before = launching(side)
    with pytest.raises(redis.ConnectionError):
        chain(add.s(1, 2), mark.s(token)).delay()
    [stored] = launching(side) - marked_before
    h = live_app.workflow(stored)
    first = f"{h.id}.0"
    assert h.status() is WorkflowState.RUNNING
    assert live_app.broker.jobs.read("wf", first) is None

    reconciler = Reconciler(live_app.broker, [])
    reconciler.run()  # the mark is fresh: its producer may still be sending
    assert live_app.broker.jobs.read("wf", first) is None
    old = int(time.time() * 1000) - LAUNCH_GRACE_MS - 1_000
    side.zadd(WORKFLOW_LAUNCHING, {stored: old}, xx=True)
    reconciler.run()
    assert side.zscore(WORKFLOW_LAUNCHING, stored) is None
    assert live_app.broker.jobs.read("wf", first) is not None
    assert h.result(timeout=RESULT_TIMEOUT) == 3
    assert runs(side, token) == ["3"]


def test_a_step_cancelled_by_hand_ends_its_workflow_cancelled(
    live_app: TaskForge, side: redis.Redis, token: str
) -> None:
    """Only the reconciler delivers the report of a step cancelled by its handle: the workflow ends all the same."""
    h = chain(ident.with_options(queue=MANUAL).s(1), mark.s(token)).delay()
    first = f"{h.id}.0"
    assert live_app.job(first).cancel() is True
    reconciler = Reconciler(live_app.broker, [MANUAL])
    reconciler.run()
    reconciler.run()
    assert h.status() is WorkflowState.CANCELLED
    info = h.info()
    assert info.failed_step == first
    assert [s.state for s in info.steps] == [JobState.CANCELLED] * 2
    assert live_app.broker.jobs.read("wf", f"{h.id}.1") is None
    assert runs(side, token) == []


def test_a_running_step_aborted_ends_its_workflow_cancelled(
    live_app: TaskForge, side: redis.Redis, token: str, gate: Gate
) -> None:
    """The worker kills the step's child; the module worker's housekeeping delivers the report."""
    h = chain(gated.s(1, gate.name), mark.s(token)).delay()
    gate.wait_running()
    first = f"{h.id}.0"
    assert live_app.job(first).abort() is True
    with pytest.raises(TaskFailed) as caught:
        h.result(timeout=RESULT_TIMEOUT)
    assert (caught.value.state, caught.value.job_id) == ("cancelled", first)
    assert [s.state for s in h.info().steps] == [JobState.CANCELLED] * 2
    assert runs(side, token) == []
