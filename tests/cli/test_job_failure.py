"""``taskforge job`` shows why a job failed: the ``failure`` field, in text and in ``--json``."""

from __future__ import annotations

import json

import pytest

from taskforge import TaskForge
from taskforge.broker.keys import QueueKeys
from taskforge.job import FailureKind

from . import helpers
from .schema import JOB_SCHEMA, check

pytestmark = pytest.mark.redis


def test_a_dead_job_shows_its_failure_kind(cli_app: TaskForge, invoke) -> None:
    job_id = helpers.dead(cli_app, "cliapp.add", 1, 2)
    data = json.loads(invoke("job", "cliapp:app", job_id, "--json").stdout)
    check(data, JOB_SCHEMA)
    assert data["failure"] == FailureKind.EXCEPTION.value and data["error"] == "RuntimeError: boom"
    text = invoke("job", "cliapp:app", job_id).stdout
    assert "failure      exception" in text and "error        RuntimeError: boom" in text


def test_a_job_that_never_failed_prints_no_failure(cli_app: TaskForge, invoke) -> None:
    job_id = helpers.succeeded(cli_app, "cliapp.add", 3, 1, 2)
    assert json.loads(invoke("job", "cliapp:app", job_id, "--json").stdout)["failure"] is None
    assert "failure" not in invoke("job", "cliapp:app", job_id).stdout


def test_a_junk_failure_field_prints_as_none(cli_app: TaskForge, invoke) -> None:
    job_id = helpers.dead(cli_app, "cliapp.add", 1, 2)
    cli_app.broker.client.hset(QueueKeys("default").job(job_id), "failure", b"\xff meltdown")
    result = invoke("job", "cliapp:app", job_id, "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["failure"] is None
    assert "failure" not in invoke("job", "cliapp:app", job_id).stdout
