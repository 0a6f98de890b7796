"""A step that ends dead, and a workflow cancelled by hand: what runs, what never does, and what the handle says.

"Never runs" is shown, not assumed: the steps after the failure record every
run in the side Redis, and their side keys stay empty once everything that
could still send them (the reports of the steps that did run) is delivered.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys

import pytest
import redis

from taskforge import JobState, TaskFailed, TaskForge, WorkflowInfo, WorkflowState, chain, group
from taskforge.job import FailureKind
from tests.conftest import admin_url

from . import wfapp
from .conftest import APP_SPEC, REPO, RESULT_TIMEOUT, Gate, runs, wait_for
from .wfapp import add, boom, boom_once_started, flaky, gated, ident, mark

pytestmark = [pytest.mark.redis]


def sent(app: TaskForge, queue: str, job_id: str) -> None:
    """Wait until the step is stored: an ended workflow's on_failure is sent just after the end is recorded."""
    wait_for(lambda: app.broker.jobs.read(queue, job_id) is not None, RESULT_TIMEOUT, f"step {job_id} sent")


def delivered(app: TaskForge, queue: str, job_id: str) -> None:
    """Wait until the step's report left its queue's outbox: whatever it could send is sent."""
    wait_for(lambda: job_id not in app.broker.ledger.outbox(queue), RESULT_TIMEOUT, f"the report of {job_id}")


def test_a_dead_step_ends_the_workflow_and_later_steps_never_run(
    live_app: TaskForge, side: redis.Redis, token: str
) -> None:
    h = chain(
        add.s(1, 2),
        boom.s(f"{token}-boom"),
        mark.s(f"{token}-after"),
        mark.s(f"{token}-after2"),
        on_failure=mark.si("failed", f"{token}-fail"),
    ).delay()
    failed = f"{h.id}.1"
    with pytest.raises(TaskFailed) as caught:
        h.result(timeout=RESULT_TIMEOUT)
    exc = caught.value
    assert (exc.task, exc.job_id, exc.state, exc.kind) == (boom.name, failed, "dead", FailureKind.EXCEPTION)
    assert boom.name in str(exc) and failed in str(exc) and "ValueError: boom after 3" in str(exc)
    assert exc.traceback and "boom after" in exc.traceback
    assert h.status() is WorkflowState.DEAD

    # on_failure is the step after the last one; it runs once.
    on_failure = f"{h.id}.4"
    sent(live_app, "wf", on_failure)
    assert live_app.job(on_failure).result(timeout=RESULT_TIMEOUT) == "failed"
    delivered(live_app, "wf", on_failure)
    info = h.info()
    assert info.state is WorkflowState.DEAD and info.failed_step == failed
    assert info.error is not None and "boom after 3" in info.error
    assert [(s.id, s.state) for s in info.steps] == [
        (f"{h.id}.0", JobState.SUCCEEDED),
        (failed, JobState.DEAD),
        (f"{h.id}.2", JobState.CANCELLED),
        (f"{h.id}.3", JobState.CANCELLED),
        (on_failure, JobState.SUCCEEDED),
    ]
    assert runs(side, f"{token}-boom") == ["3"]
    assert runs(side, f"{token}-fail") == ["'failed'"]
    assert runs(side, f"{token}-after") == runs(side, f"{token}-after2") == []
    assert live_app.broker.jobs.read("wf", f"{h.id}.2") is None  # never even stored
    wait_for(lambda: h.id in live_app.broker.ledger.workflow_ids("dead"), RESULT_TIMEOUT, "listed as dead")


def test_a_step_is_retried_before_it_ends_the_workflow(live_app: TaskForge, side: redis.Redis, token: str) -> None:
    h = chain(ident.s("in"), flaky.s(f"{token}-flaky"), mark.s(f"{token}-after")).delay()
    with pytest.raises(TaskFailed) as caught:
        h.result(timeout=RESULT_TIMEOUT)
    assert (caught.value.task, caught.value.job_id) == (flaky.name, f"{h.id}.1")
    assert runs(side, f"{token}-flaky") == ["'in'"] * 3  # max_attempts=3: its own retries first
    steps = h.info().steps
    assert (steps[1].state, steps[1].attempts) == (JobState.DEAD, 3)
    assert steps[2].state is JobState.CANCELLED
    assert runs(side, f"{token}-after") == []


def test_running_members_of_the_failed_group_finish(
    live_app: TaskForge, side: redis.Redis, token: str, gate: Gate
) -> None:
    started = f"{token}-started"
    h = chain(
        ident.s(7),
        group(boom_once_started.s(f"{token}-boom", started), gated.s(gate.name, started)),
        mark.s(f"{token}-after"),
        on_failure=mark.si("failed", f"{token}-fail"),
    ).delay()
    failing, running, follow_up, on_failure = (f"{h.id}.{i}" for i in range(1, 5))
    with pytest.raises(TaskFailed) as caught:
        h.result(timeout=RESULT_TIMEOUT)
    assert (caught.value.task, caught.value.job_id) == (boom_once_started.name, failing)
    # The workflow is dead while its other member still runs (held at its gate).
    assert live_app.job(running).status() is JobState.RUNNING
    assert [s.state for s in h.info().steps[:4]] == [
        JobState.SUCCEEDED,
        JobState.DEAD,
        JobState.RUNNING,
        JobState.CANCELLED,
    ]
    sent(live_app, "wf", on_failure)
    assert live_app.job(on_failure).result(timeout=RESULT_TIMEOUT) == "failed"

    gate.open()
    assert live_app.job(running).result(timeout=RESULT_TIMEOUT) == 7  # it finished, and succeeded
    delivered(live_app, "wf", running)
    delivered(live_app, "wf", on_failure)
    assert h.status() is WorkflowState.DEAD
    assert h.info().failed_step == failing
    assert runs(side, f"{token}-after") == []
    assert runs(side, f"{token}-fail") == ["'failed'"]
    assert h.info().steps[3].state is JobState.CANCELLED
    assert live_app.broker.jobs.read("wf", follow_up) is None  # never stored, so never run


def test_cancel_stops_the_steps_not_started(live_app: TaskForge, side: redis.Redis, token: str, gate: Gate) -> None:
    h = chain(gated.s(1, gate.name), mark.s(f"{token}-1"), mark.s(f"{token}-2")).delay()
    gate.wait_running()
    assert h.cancel() is True
    assert h.status() is WorkflowState.CANCELLED
    assert h.cancel() is False  # only a running workflow can be cancelled
    with pytest.raises(TaskFailed) as caught:
        h.result(timeout=1)
    assert caught.value.state == "cancelled"

    gate.open()  # the running step finishes; its report must send nothing
    first = f"{h.id}.0"
    assert live_app.job(first).result(timeout=RESULT_TIMEOUT) == 1
    delivered(live_app, "wf", first)
    info = h.info()
    assert info.state is WorkflowState.CANCELLED and info.finished_at is not None
    assert [s.state for s in info.steps] == [JobState.SUCCEEDED, JobState.CANCELLED, JobState.CANCELLED]
    assert runs(side, f"{token}-1") == runs(side, f"{token}-2") == []
    assert h.id in live_app.broker.ledger.workflow_ids("cancelled")


def test_cancel_before_the_first_step_started(live_app: TaskForge, side: redis.Redis, token: str) -> None:
    # The first step waits on a queue no worker serves: it cannot start before the cancel.
    h = chain(ident.with_options(queue=wfapp.MANUAL).s(1), mark.s(token)).delay()
    first = f"{h.id}.0"
    assert live_app.job(first).status() is JobState.PENDING
    assert h.cancel() is True
    assert live_app.job(first).status() is JobState.CANCELLED
    claims, _ = live_app.broker.claims.dequeue(wfapp.MANUAL, 60_000, count=10)
    assert [c.id for c in claims if c.id.startswith(h.id)] == []
    assert [s.state for s in h.info().steps] == [JobState.CANCELLED] * 2
    assert runs(side, token) == []


def test_the_workflow_command_shows_a_dead_workflow(live_app: TaskForge, module_redis: str, token: str) -> None:
    h = chain(add.s(1, 2), boom.s(f"{token}-boom"), mark.s(f"{token}-after")).delay()
    with pytest.raises(TaskFailed):
        h.result(timeout=RESULT_TIMEOUT)
    shown = taskforge_command(module_redis, "workflow", APP_SPEC, h.id, "--json")
    assert shown.returncode == 0, shown.stderr
    data = json.loads(shown.stdout)
    assert set(data) == {field.name for field in dataclasses.fields(WorkflowInfo)}
    assert (data["id"], data["state"], data["failed_step"]) == (h.id, "dead", f"{h.id}.1")
    assert [(s["id"], s["state"]) for s in data["steps"]] == [
        (f"{h.id}.0", "succeeded"),
        (f"{h.id}.1", "dead"),
        (f"{h.id}.2", "cancelled"),
    ]
    missing = taskforge_command(module_redis, "workflow", APP_SPEC, "0" * 32)
    assert missing.returncode == 2


def taskforge_command(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TASKFORGE_BROKER_URL": url, "SIDE_REDIS": admin_url(url)}
    return subprocess.run(
        [sys.executable, "-m", "taskforge", *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=60
    )
