"""A dead workflow resumed: by retrying one of its dead steps, by ``WorkflowHandle.retry()``, by the command line.

Each scenario fails a step on purpose (``fails_until_fixed``), shows the
workflow dead, "fixes the bug" and resumes it; then shows that the dead
steps ran again, that the steps the death had cancelled were planned again
and ran once, and that ``on_failure`` ran again only when the workflow died
again.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
import redis

from taskforge import JobState, TaskFailed, TaskForge, WorkflowHandle, WorkflowState, chain, group
from taskforge.broker.keys import WORKFLOW_RESUMING
from taskforge.serialization import dumps_result
from taskforge.worker.reconcile import LAUNCH_GRACE_MS, Reconciler
from taskforge.workflows.delivery import deliver, report_of

from . import wfapp
from .conftest import APP_SPEC, RESULT_TIMEOUT, Gate, runs, wait_for
from .test_failures import delivered, sent, taskforge_command
from .wfapp import MANUAL, add, fails_once_started_until_fixed, fails_until_fixed, gated, ident, mark, total

pytestmark = [pytest.mark.redis]


def fix(side: redis.Redis, key: str) -> None:
    side.set(wfapp.side_key(f"{key}:fixed"), "1")


def dead(h: WorkflowHandle[Any]) -> None:
    """Wait until the workflow ended dead."""
    with pytest.raises(TaskFailed):
        h.result(timeout=RESULT_TIMEOUT)


def test_dead_retry_of_a_step_resumes_its_workflow(
    live_app: TaskForge, module_redis: str, side: redis.Redis, token: str
) -> None:
    h = chain(
        add.s(1, 2),
        fails_until_fixed.s(f"{token}-step"),
        mark.s(f"{token}-after"),
        on_failure=mark.si("failed", f"{token}-fail"),
    ).delay()
    failed, on_failure = f"{h.id}.1", f"{h.id}.3"
    dead(h)
    sent(live_app, "wf", on_failure)
    assert live_app.job(on_failure).result(timeout=RESULT_TIMEOUT) == "failed"
    delivered(live_app, "wf", on_failure)

    fix(side, f"{token}-step")
    retried = taskforge_command(module_redis, "dead", APP_SPEC, "retry", failed)
    assert retried.returncode == 0, retried.stderr
    assert "retried 1 dead job" in retried.stdout
    assert h.result(timeout=RESULT_TIMEOUT) == 3
    assert h.status() is WorkflowState.SUCCEEDED
    assert runs(side, f"{token}-step") == ["3", "3"]
    assert runs(side, f"{token}-after") == ["3"]
    assert runs(side, f"{token}-fail") == ["'failed'"]  # it did not die again: on_failure ran once
    info = h.info()
    assert info.failed_step is None and info.error is None and info.holding_step is None
    assert [s.state for s in info.steps[:3]] == [JobState.SUCCEEDED] * 3
    shown = taskforge_command(module_redis, "workflow", APP_SPEC, h.id)
    assert shown.returncode == 0, shown.stderr
    assert "held up by" not in shown.stdout and "succeeded" in shown.stdout
    wait_for(lambda: h.id in live_app.broker.ledger.workflow_ids("succeeded"), RESULT_TIMEOUT, "listed as succeeded")
    assert h.id not in live_app.broker.ledger.workflow_ids("dead")


def test_retry_runs_the_dead_steps_again_and_plans_the_cancelled_ones_again(
    live_app: TaskForge, side: redis.Redis, token: str
) -> None:
    # A group whose member on wf-manual (served by no worker) is pending when its sibling dies: cancelled.
    h = chain(
        ident.s(5),
        group(fails_until_fixed.s(f"{token}-step"), ident.with_options(queue=MANUAL).s()),
        total.s(),
        mark.s(f"{token}-after"),
    ).delay()
    failing, parked, summing = f"{h.id}.1", f"{h.id}.2", f"{h.id}.3"
    dead(h)
    wait_for(lambda: live_app.job(parked).status() is JobState.CANCELLED, RESULT_TIMEOUT, "the parked member stopped")
    assert h.retry() is True  # not fixed yet: it dies again, and its parked member is stopped again
    dead(h)
    wait_for(lambda: live_app.job(parked).status() is JobState.CANCELLED, RESULT_TIMEOUT, "stopped again")
    assert runs(side, f"{token}-step") == ["5", "5"]

    fix(side, f"{token}-step")
    assert h.retry() is True
    assert h.status() is WorkflowState.RUNNING
    assert h.retry() is False  # running: nothing to resume
    assert live_app.job(parked).status() is JobState.PENDING  # planned again, sent again
    assert live_app.job(failing).result(timeout=RESULT_TIMEOUT) == 5
    delivered(live_app, "wf", failing)
    assert live_app.broker.jobs.read("wf", summing) is None  # still waits for the parked member

    claims, _ = live_app.broker.claims.dequeue(MANUAL, 60_000, count=10)
    [claim] = [c for c in claims if c.workflow == h.id]
    assert claim.id == parked
    assert live_app.broker.claims.succeed(MANUAL, claim.id, claim.token, dumps_result(5))
    deliver(live_app.broker, [report_of(MANUAL, claim.id, h.id, "succeeded", dumps_result(5))])
    assert h.result(timeout=RESULT_TIMEOUT) == 10
    assert runs(side, f"{token}-after") == ["10"]
    assert runs(side, f"{token}-step") == ["5", "5", "5"]


def test_the_workflow_command_retries_and_on_failure_runs_again_only_when_it_dies_again(
    live_app: TaskForge, module_redis: str, side: redis.Redis, token: str
) -> None:
    h = chain(add.s(2, 2), fails_until_fixed.s(f"{token}-step"), on_failure=mark.s(f"{token}-fail")).delay()
    on_failure = f"{h.id}.2"
    dead(h)
    sent(live_app, "wf", on_failure)
    live_app.job(on_failure).result(timeout=RESULT_TIMEOUT)
    delivered(live_app, "wf", on_failure)

    again = taskforge_command(module_redis, "workflow", APP_SPEC, h.id, "--retry")  # not fixed: it dies again
    assert again.returncode == 0, again.stderr
    wait_for(lambda: len(runs(side, f"{token}-fail")) == 2, RESULT_TIMEOUT, "on_failure run again")
    dead(h)
    fix(side, f"{token}-step")
    resumed = taskforge_command(module_redis, "workflow", APP_SPEC, h.id, "--retry")
    assert resumed.returncode == 0, resumed.stderr
    assert h.result(timeout=RESULT_TIMEOUT) == 4
    assert len(runs(side, f"{token}-fail")) == 2
    refused = taskforge_command(module_redis, "workflow", APP_SPEC, h.id, "--retry")
    assert refused.returncode == 2 and "succeeded, not dead" in refused.stderr


def test_on_failure_built_with_s_gets_the_failed_steps_summary(
    live_app: TaskForge, side: redis.Redis, token: str
) -> None:
    h = chain(add.s(2, 3), fails_until_fixed.s(f"{token}-step"), on_failure=mark.s(f"{token}-fail")).delay()
    on_failure = f"{h.id}.2"
    dead(h)
    sent(live_app, "wf", on_failure)
    summary = live_app.job(on_failure).result(timeout=RESULT_TIMEOUT)
    assert set(summary) == {"id", "task", "error", "error_type", "traceback"}
    assert (summary["id"], summary["task"]) == (f"{h.id}.1", fails_until_fixed.name)
    assert "not fixed yet: 5" in summary["error"]
    assert "ValueError" in summary["traceback"] and "not fixed yet" in summary["traceback"]
    assert summary["error_type"] in (None, "builtins.ValueError")  # the job record's field, once it has one
    assert live_app.job(on_failure).info().args[0] == summary


def test_an_interrupted_resume_is_finished_by_the_reconciler(
    live_app: TaskForge, side: redis.Redis, token: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    h = chain(add.s(1, 1), fails_until_fixed.s(f"{token}-step"), mark.s(f"{token}-after")).delay()
    dead(h)
    fix(side, f"{token}-step")

    def lost(*args: object) -> None:
        raise redis.ConnectionError("the resumer lost Redis half way")

    monkeypatch.setattr("taskforge.workflows.resume.replanning", lost)
    with pytest.raises(redis.ConnectionError):
        h.retry()
    monkeypatch.undo()
    assert h.status() is WorkflowState.RUNNING  # the record's change is whole
    assert live_app.job(f"{h.id}.1").status() is JobState.DEAD  # its step not yet back in line
    assert side.zscore(WORKFLOW_RESUMING, h.id) is not None

    reconciler = Reconciler(live_app.broker, [])
    reconciler.run()  # the mark is fresh: its resumer may still be at it
    assert live_app.job(f"{h.id}.1").status() is JobState.DEAD
    side.zadd(WORKFLOW_RESUMING, {h.id: int(time.time() * 1000) - LAUNCH_GRACE_MS - 1_000}, xx=True)
    reconciler.run()
    assert side.zscore(WORKFLOW_RESUMING, h.id) is None
    assert h.result(timeout=RESULT_TIMEOUT) == 2
    assert runs(side, f"{token}-after") == ["2"]


def test_aretry_resumes_from_async_code(live_app: TaskForge, side: redis.Redis, token: str) -> None:
    h = chain(add.s(3, 3), fails_until_fixed.s(f"{token}-step")).delay()
    dead(h)
    fix(side, f"{token}-step")

    async def main() -> None:
        try:
            assert await h.aretry() is True
            assert await h.aresult(timeout=RESULT_TIMEOUT) == 6
            assert await h.aretry() is False
        finally:
            await live_app.aclose()

    asyncio.run(main())


def test_the_dashboards_retry_of_a_dead_step_resumes_its_workflow(
    live_app: TaskForge, side: redis.Redis, token: str
) -> None:
    from taskforge.dashboard.pages import apply_action

    h = chain(add.s(4, 4), fails_until_fixed.s(f"{token}-step"), mark.s(f"{token}-after")).delay()
    dead(h)
    fix(side, f"{token}-step")
    assert apply_action(live_app, f"{h.id}.1", "wf", "retry") is None  # what its Retry button posts does
    assert h.result(timeout=RESULT_TIMEOUT) == 8
    assert runs(side, f"{token}-after") == ["8"]


def test_a_member_that_finished_after_the_death_is_not_run_again(
    live_app: TaskForge, side: redis.Redis, token: str, gate: Gate
) -> None:
    started = f"{token}-started"
    h = chain(
        ident.s(7),
        group(fails_once_started_until_fixed.s(f"{token}-step", started), gated.s(gate.name, started)),
        total.s(),
    ).delay()
    running = f"{h.id}.2"
    dead(h)
    assert live_app.job(running).status() is JobState.RUNNING
    gate.open()
    assert live_app.job(running).result(timeout=RESULT_TIMEOUT) == 7  # succeeded after its workflow died
    delivered(live_app, "wf", running)

    fix(side, f"{token}-step")
    side.rpush(wfapp.side_key(started), "started")  # what the failing member waits for, this time
    assert h.retry() is True
    assert h.result(timeout=RESULT_TIMEOUT) == 14
    assert gate.order() == ["gated"]  # ran once: its result was kept


def test_dead_retry_all_resumes_the_workflows_of_the_dead_steps(
    live_app: TaskForge, module_redis: str, side: redis.Redis, token: str
) -> None:
    flows = [chain(add.s(n, n), fails_until_fixed.s(f"{token}-{n}"), mark.s(f"{token}-after")).delay() for n in (1, 2)]
    for h in flows:
        dead(h)
    for n in (1, 2):
        fix(side, f"{token}-{n}")
    retried = taskforge_command(module_redis, "dead", APP_SPEC, "retry", "--all", "--queue", "wf")
    assert retried.returncode == 0, retried.stderr
    assert [h.result(timeout=RESULT_TIMEOUT) for h in flows] == [2, 4]
    assert sorted(runs(side, f"{token}-after")) == ["2", "4"]


def test_a_dead_step_retried_without_its_resume_keeps_its_result_for_a_later_one(
    live_app: TaskForge, side: redis.Redis, token: str
) -> None:
    h = chain(add.s(6, 6), fails_until_fixed.s(f"{token}-step"), mark.s(f"{token}-after")).delay()
    failed = f"{h.id}.1"
    dead(h)
    fix(side, f"{token}-step")
    # The step moved back in line alone, as by a process that died before resuming its workflow.
    assert live_app.broker.cleanup.retry_dead("wf", [failed]) == [failed]
    assert live_app.job(failed).result(timeout=RESULT_TIMEOUT) == 12
    delivered(live_app, "wf", failed)
    assert h.status() is WorkflowState.DEAD and h.info().holding_step is None
    assert h.retry() is True  # the step counts as succeeded: what came after it goes on
    assert h.result(timeout=RESULT_TIMEOUT) == 12
    assert runs(side, f"{token}-step") == ["12", "12"] and runs(side, f"{token}-after") == ["12"]
