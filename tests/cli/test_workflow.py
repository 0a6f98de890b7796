"""``taskforge workflow``: steps in order, what holds it up, JSON with the WorkflowInfo field names, errors;
and the workflow counts of ``taskforge status``."""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from taskforge import TaskForge, WorkflowInfo, chain, group
from taskforge.broker.keys import QueueKeys
from taskforge.broker.queue import Claim
from taskforge.loader import load_app
from taskforge.serialization import dumps_result

from .conftest import one_line_error
from .schema import JOB_SCHEMA, NULLABLE_ISO, STATUS_SCHEMA, check

pytestmark = pytest.mark.redis

FLOW_APP = """
from datetime import date

from taskforge import TaskForge

app = TaskForge("flowapp")


@app.task
def add(x, y):
    return x + y


@app.task
def tag(values):
    return {"sum": sum(values), "day": date(2027, 1, 2), "pair": (1, 2)}


@app.task(max_attempts=1)
def explode(value):
    raise RuntimeError(f"exploded on {value}")


@app.task(queue="alerts")
def alert(message):
    return message
"""

WORKFLOW_SCHEMA = {
    "id": str,
    "state": str,
    "created_at": NULLABLE_ISO,
    "finished_at": NULLABLE_ISO,
    "error": (str, type(None)),
    "failed_step": (str, type(None)),
    "on_failure": (str, type(None)),
    "steps": [JOB_SCHEMA],
}


@pytest.fixture
def flow_app(tmp_path: Path, redis_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[TaskForge]:
    """``flowapp:app`` on the test Redis: the object the CLI loads, so ``drain()`` here runs its steps."""
    (tmp_path / "flowapp.py").write_text(FLOW_APP)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("TASKFORGE_BROKER_URL", redis_url)
    sys.modules.pop("flowapp", None)
    yield load_app("flowapp:app")
    sys.modules.pop("flowapp", None)


def step(app: TaskForge, name: str):
    return app.tasks[f"flowapp.{name}"]


def succeeded_chord(app: TaskForge) -> str:
    """add(1, 2) -> group(add(10), add(20)) -> tag([13, 23]), run to the end."""
    add, tag = step(app, "add"), step(app, "tag")
    handle = chain(add.s(1, 2), group(add.s(10), add.s(20)), tag.s()).delay()
    app.drain()
    return handle.id


def dead_with_on_failure(app: TaskForge) -> str:
    """add(1, 2) -> explode -> add(5), with an alert on failure: ends dead at its second step."""
    add, explode, alert = step(app, "add"), step(app, "explode"), step(app, "alert")
    handle = chain(add.s(1, 2), explode.s(), add.s(5), on_failure=alert.si("pipeline failed")).delay()
    app.drain()
    return handle.id


def lines_of_steps(out: str, workflow_id: str) -> list[list[str]]:
    """The rows of the steps table, split into words."""
    rows = [line.split() for line in out.splitlines()]
    return [row for row in rows if row[:1] and row[0].isdigit() and row[1].startswith(f"{workflow_id}.")]


def test_json_has_exactly_the_workflowinfo_fields(flow_app: TaskForge, invoke) -> None:
    workflow_id = succeeded_chord(flow_app)
    result = invoke("workflow", "flowapp:app", workflow_id, "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert set(data) == {f.name for f in dataclasses.fields(WorkflowInfo)}
    check(data, WORKFLOW_SCHEMA)
    assert data["id"] == workflow_id and data["state"] == "succeeded"
    assert data["error"] is None and data["failed_step"] is None and data["finished_at"] is not None
    steps = data["steps"]
    assert [s["id"] for s in steps] == [f"{workflow_id}.{i}" for i in range(4)]
    assert [s["task"] for s in steps] == ["flowapp.add", "flowapp.add", "flowapp.add", "flowapp.tag"]
    assert [s["state"] for s in steps] == ["succeeded"] * 4
    assert [s["args"] for s in steps] == [[1, 2], [3, 10], [3, 20], [[13, 23]]]
    # Each step as `job --json` prints it: values JSON has no type for are rendered.
    assert steps[3]["result"] == {"sum": 36, "day": "2027-01-02", "pair": [1, 2]}
    assert steps[1] == json.loads(invoke("job", "flowapp:app", steps[1]["id"], "--json").stdout)


def test_human_output_names_the_failed_step_and_the_on_failure_step(flow_app: TaskForge, invoke) -> None:
    workflow_id = dead_with_on_failure(flow_app)
    result = invoke("workflow", "flowapp:app", workflow_id)
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "\x1b[" not in out
    fields = {line[:13].strip(): line[13:] for line in out.split("\n\n")[0].splitlines()}
    assert fields["id"] == workflow_id and fields["state"] == "dead"
    assert fields["failed_step"] == f"{workflow_id}.1"
    assert fields["error"] == "RuntimeError: exploded on 3"
    assert fields["held up by"] == f"{workflow_id}.1 flowapp.explode (dead)"
    assert fields["steps"] == "4: 2 succeeded, 1 dead, 1 cancelled"
    rows = lines_of_steps(out, workflow_id)
    assert [row[:5] for row in rows] == [
        ["1", f"{workflow_id}.0", "flowapp.add", "default", "succeeded"],
        ["2", f"{workflow_id}.1", "flowapp.explode", "default", "dead"],
        ["3", f"{workflow_id}.2", "flowapp.add", "default", "cancelled"],
        ["4", f"{workflow_id}.3", "flowapp.alert", "alerts", "succeeded"],
    ]
    assert rows[1][5:] == ["1/1", "<-", "holds", "the", "workflow", "up"]
    assert rows[3][5:] == ["1/3", "on_failure"]
    assert [len(row) for row in (rows[0], rows[2])] == [6, 6]  # nothing to note


def claim(app: TaskForge, queue: str) -> Claim:
    claims, _ = app.broker.claims.dequeue(queue, 60_000)
    assert len(claims) == 1, f"nothing ready in {queue}"
    return claims[0]


def test_a_running_workflow_is_held_up_by_its_first_step_not_succeeded(flow_app: TaskForge, invoke) -> None:
    add = step(flow_app, "add")
    handle = chain(add.s(1, 2), add.s(3), add.s(4)).delay()
    out = invoke("workflow", "flowapp:app", handle.id).stdout
    assert f"held up by   {handle.id}.0 flowapp.add (pending)" in out
    # The first step succeeds (its report not delivered yet: no worker here); the second is not sent yet.
    first = claim(flow_app, "default")
    assert first.id == f"{handle.id}.0"
    assert flow_app.broker.claims.succeed("default", first.id, first.token, dumps_result(3))
    result = invoke("workflow", "flowapp:app", handle.id)
    assert result.exit_code == 0, result.output
    assert f"held up by   {handle.id}.1 flowapp.add (pending)" in result.stdout
    assert [row[4] for row in lines_of_steps(result.stdout, handle.id)] == ["succeeded", "pending", "pending"]
    data = json.loads(invoke("workflow", "flowapp:app", handle.id, "--json").stdout)
    assert data["state"] == "running" and data["finished_at"] is None
    assert [s["created_at"] is None for s in data["steps"]] == [False, True, True]  # listed before being sent


def test_a_cancelled_workflow_is_held_up_by_nothing(flow_app: TaskForge, invoke) -> None:
    add = step(flow_app, "add")
    handle = chain(add.s(1, 2), add.s(3)).delay()
    assert handle.cancel()
    result = invoke("workflow", "flowapp:app", handle.id)
    assert result.exit_code == 0, result.output
    assert "cancelled" in result.stdout.splitlines()[1] and "held up by" not in result.stdout
    assert [row[4] for row in lines_of_steps(result.stdout, handle.id)] == ["cancelled", "cancelled"]


def test_retry_resumes_a_dead_workflow_and_on_failure_runs_again_when_it_dies_again(
    flow_app: TaskForge, invoke
) -> None:
    workflow_id = dead_with_on_failure(flow_app)
    alert = f"{workflow_id}.3"
    first_alert = flow_app.broker.jobs.read("alerts", alert)
    result = invoke("workflow", "flowapp:app", workflow_id, "--retry")
    assert result.exit_code == 0, result.output
    fields = {line[:13].strip(): line[13:] for line in result.stdout.split("\n\n")[0].splitlines()}
    assert fields["state"] == "running" and "failed_step" not in fields and "error" not in fields
    assert fields["held up by"] == f"{workflow_id}.1 flowapp.explode (pending)"
    assert flow_app.broker.jobs.read("alerts", alert) is None  # its first run's record dropped
    flow_app.drain()  # explode still explodes: dead again, and the alert is sent again
    data = json.loads(invoke("workflow", "flowapp:app", workflow_id, "--json").stdout)
    assert (data["state"], data["failed_step"]) == ("dead", f"{workflow_id}.1")
    assert first_alert is not None and flow_app.broker.jobs.read("alerts", alert) is not None  # sent again
    assert [s["state"] for s in data["steps"]] == ["succeeded", "dead", "cancelled", "succeeded"]
    assert [s["attempts"] for s in data["steps"]][:2] == [1, 1]  # a fresh set of attempts


def test_retry_of_a_workflow_not_dead_exits_2(flow_app: TaskForge, invoke) -> None:
    workflow_id = succeeded_chord(flow_app)
    result = invoke("workflow", "flowapp:app", workflow_id, "--retry")
    assert result.exit_code == 2
    assert f"workflow {workflow_id} is succeeded, not dead" in result.stderr
    assert invoke("workflow", "flowapp:app", "0" * 32, "--retry").exit_code == 2


def test_a_dead_workflow_is_never_held_up_by_a_step_that_succeeded(flow_app: TaskForge, invoke) -> None:
    # A dead step retried and succeeded while its workflow stayed dead (as before workflows resumed).
    workflow_id = dead_with_on_failure(flow_app)
    flow_app.broker.client.hset(QueueKeys("default").job(f"{workflow_id}.1"), "state", "succeeded")
    result = invoke("workflow", "flowapp:app", workflow_id)
    assert result.exit_code == 0, result.output
    assert "held up by" not in result.stdout and "holds the workflow up" not in result.stdout


def test_unknown_workflow_id_exits_2_with_one_line(flow_app: TaskForge, invoke) -> None:
    result = invoke("workflow", "flowapp:app", "0" * 32)
    assert result.exit_code == 2 and result.stdout == ""
    assert "no workflow 00000000000000000000000000000000" in one_line_error(result)
    assert invoke("workflow", "flowapp:app", "0" * 32, "--json").exit_code == 2
    # A job id is not a workflow id.
    job_id = step(flow_app, "add").delay(1, 1).id
    assert invoke("workflow", "flowapp:app", job_id).exit_code == 2


@pytest.mark.parametrize(
    "args",
    [
        ["workflow", "flowapp:app"],  # no WORKFLOW_ID
        ["workflow", "flowapp:app", "abc", "--frobnicate"],
        ["workflow", "nosuchmodule:app", "abc"],
        ["workflow", "flowapp:app", ""],  # an empty id
    ],
    ids=["missing id", "unknown option", "bad app", "empty id"],
)
def test_wrong_arguments_exit_2(flow_app: TaskForge, invoke, args: list[str]) -> None:
    result = invoke(*args)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output


def test_unreachable_broker_exits_1_naming_the_redacted_url(flow_app: TaskForge, invoke, monkeypatch) -> None:
    monkeypatch.setenv("TASKFORGE_BROKER_URL", "redis://user:s3cret@127.0.0.1:1/0")
    sys.modules.pop("flowapp", None)
    result = invoke("workflow", "flowapp:app", "0" * 32)
    assert result.exit_code == 1, result.output
    assert "redis://user:***@127.0.0.1:1/0" in one_line_error(result) and "s3cret" not in result.output


def test_help_has_an_example(invoke) -> None:
    result = invoke("workflow", "--help")
    assert result.exit_code == 0
    example = result.stdout.split("Example:", 1)[1].strip().splitlines()[0]
    assert example.startswith("taskforge workflow ")


def test_status_counts_workflows_by_state(flow_app: TaskForge, invoke) -> None:
    add = step(flow_app, "add")
    succeeded_chord(flow_app)
    dead_with_on_failure(flow_app)
    assert chain(add.s(1, 2), add.s(3)).delay().cancel()
    chain(add.s(1, 2), add.s(3)).delay()
    group(add.s(1, 1), add.s(2, 2)).delay()
    result = invoke("status", "flowapp:app", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    check(data, STATUS_SCHEMA)
    assert data["workflows"] == {"running": 2, "succeeded": 1, "dead": 1, "cancelled": 1}
    out = invoke("status", "flowapp:app").stdout
    assert "workflows: 2 running; in the last 1 day (retention): 1 succeeded, 1 dead, 1 cancelled" in out
    flow_app.drain()
    data = json.loads(invoke("status", "flowapp:app", "--json").stdout)
    assert data["workflows"] == {"running": 0, "succeeded": 3, "dead": 1, "cancelled": 1}


def test_status_without_workflows_counts_zero(flow_app: TaskForge, invoke) -> None:
    data = json.loads(invoke("status", "flowapp:app", "--json").stdout)
    assert data["workflows"] == {"running": 0, "succeeded": 0, "dead": 0, "cancelled": 0}
    assert "workflows: 0 running; in the last 1 day (retention): 0 succeeded, 0 dead, 0 cancelled" in (
        invoke("status", "flowapp:app").stdout
    )
