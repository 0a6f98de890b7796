"""``taskforge status``: counts by state and priority, workers, JSON schema, errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime

import pytest

from taskforge import Priority, TaskForge
from tests.conftest import admin_url
from tests.worker.conftest import wait_for

from . import helpers
from .conftest import one_line_error
from .schema import STATUS_SCHEMA, check

pytestmark = pytest.mark.redis


def populate(app: TaskForge) -> None:
    """default: 1 running, 2 retrying, 1 dead, then 1 low, 2 normal, 3 high, 4 critical pending, 1 scheduled."""
    helpers.running(app, "cliapp.add", 0, 0)
    helpers.retrying(app, "cliapp.add", 1, 1)
    helpers.retrying(app, "cliapp.add", 2, 2)
    helpers.dead(app, "cliapp.add", 3, 3)
    add = app.tasks["cliapp.add"]
    for priority, n in ((Priority.LOW, 1), (Priority.NORMAL, 2), (Priority.HIGH, 3), (Priority.CRITICAL, 4)):
        add.with_options(priority=priority).delay_many([(i, i) for i in range(n)])
    add.apply_in(30, 9, 9)


def test_json_counts_every_state_and_priority(cli_app: TaskForge, invoke) -> None:
    populate(cli_app)
    result = invoke("status", "cliapp:app", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    check(data, STATUS_SCHEMA)
    queues = {q["name"]: q for q in data["queues"]}
    assert [q["name"] for q in data["queues"]][:2] == ["default", "mail"]  # the app's own queues first
    assert queues["default"] == {
        "name": "default",
        "pending": 10,
        "pending_by_priority": {"critical": 4, "high": 3, "normal": 2, "low": 1},
        "scheduled": 1,
        "retrying": 2,
        "running": 1,
        "dead": 1,
        "estimated": False,
        "next_due": queues["default"]["next_due"],
        "expired_last_hour": 0,
        "paused": False,
        "held": 0,
        "deferred": 0,
    }
    assert queues["mail"]["pending"] == 0 and queues["mail"]["next_due"] is None
    # The soonest due is a retry (600 s) or the scheduled job (30 s): the latter.
    due = datetime.fromisoformat(data["next_due"])
    assert 20 < (due - datetime.fromisoformat(data["generated_at"])).total_seconds() <= 31
    assert data["workers"] == [] and data["jobs_done"] == 0
    assert data["schema_version"] == 1


def test_human_table_is_aligned_and_plain_off_a_terminal(cli_app: TaskForge, invoke) -> None:
    populate(cli_app)
    result = invoke("status", "cliapp:app")
    assert result.exit_code == 0, result.output
    assert "\x1b[" not in result.stdout
    lines = result.stdout.splitlines()
    header = next(line for line in lines if line.startswith("QUEUE"))
    row = next(line for line in lines if line.startswith("default"))
    assert (
        header.split()
        == "QUEUE PENDING CRIT HIGH NORM LOW SCHEDULED RETRYING HELD DEFERRED RUNNING DEAD EXPIRED NEXT DUE".split()
    )
    assert row.split()[:12] == ["default", "10", "4", "3", "2", "1", "1", "2", "0", "0", "1", "1"]
    # Numbers end under the end of their header.
    assert row.index("10") + 2 == header.index("PENDING") + len("PENDING")
    assert "no live workers" in result.stdout
    assert "next scheduled job: in" in result.stdout


def test_colour_only_when_asked_for_a_terminal(cli_app: TaskForge, invoke) -> None:
    helpers.dead(cli_app, "cliapp.add", 1, 1)
    assert "\x1b[31m" in invoke("status", "cliapp:app", color=True).stdout


def test_queues_of_other_apps_are_listed_too(cli_app: TaskForge, invoke, redis_url: str) -> None:
    other = TaskForge("other", broker=redis_url)
    other.task_for("x.y").with_options(queue="reports").delay()
    data = json.loads(invoke("status", "cliapp:app", "--json").stdout)
    assert [q["name"] for q in data["queues"]] == ["default", "mail", "reports"]


def test_live_worker_is_listed(start_worker, workdir, redis_url: str) -> None:
    worker = start_worker("-c", "2", "--visibility-timeout", "3")
    producer = TaskForge("producer", broker=redis_url)
    assert producer.send("userapp.record", "s").result(timeout=20) == 1
    env = {"TASKFORGE_BROKER_URL": redis_url, "SIDE_REDIS": admin_url(redis_url)}

    def listed() -> dict | None:
        out = subprocess.run(
            [sys.executable, "-m", "taskforge", "status", "userapp:app", "--json"],
            cwd=workdir,
            env={**os.environ, **env},
            capture_output=True,
            text=True,
            timeout=20,
        )
        assert out.returncode == 0, out.stderr
        data = json.loads(out.stdout)
        return data if data["workers"] and data["workers"][0]["jobs_done"] >= 1 else None

    data = wait_for(listed, 15, "the worker to publish a heartbeat with its finished job")
    check(data, STATUS_SCHEMA)
    (w,) = data["workers"]
    assert w["pid"] == worker.pid and w["concurrency"] == 2 and w["queues"] == ["default"]
    assert data["jobs_done"] == w["jobs_done"] >= 1


def test_bad_app_is_a_usage_error(cli_app: TaskForge, invoke) -> None:
    result = invoke("status", "nosuchmodule:app")
    assert result.exit_code == 2
    assert "nosuchmodule" in one_line_error(result)
