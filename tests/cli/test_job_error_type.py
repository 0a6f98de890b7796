"""``taskforge job`` shows the class path of a failure's error and a running job's progress meta."""

from __future__ import annotations

import json

import pytest

from taskforge import TaskForge
from taskforge.job import FailureKind
from taskforge.serialization import dumps

from . import helpers
from .schema import JOB_SCHEMA, check

pytestmark = pytest.mark.redis


def test_a_dead_job_shows_its_error_type(cli_app: TaskForge, invoke) -> None:
    cli_app.send("cliapp.add", 1, 2)
    job = helpers.claim_one(cli_app, "default")
    error = "PaymentDeclined: card 42"
    cli_app.broker.claims.fail(
        "default", job.id, job.token, error, "tb", None, FailureKind.EXCEPTION, "shop.PaymentDeclined"
    )
    data = json.loads(invoke("job", "cliapp:app", job.id, "--json").stdout)
    check(data, JOB_SCHEMA)
    assert (data["error_type"], data["error"]) == ("shop.PaymentDeclined", error)
    assert "error_type   shop.PaymentDeclined" in invoke("job", "cliapp:app", job.id).stdout


def test_a_job_that_never_failed_has_no_error_type(cli_app: TaskForge, invoke) -> None:
    job_id = helpers.succeeded(cli_app, "cliapp.add", 3, 1, 2)
    data = json.loads(invoke("job", "cliapp:app", job_id, "--json").stdout)
    assert data["error_type"] is None and data["progress_meta"] is None
    assert "error_type" not in invoke("job", "cliapp:app", job_id).stdout


def test_a_running_job_shows_its_progress_meta(cli_app: TaskForge, invoke) -> None:
    cli_app.send("cliapp.add", 1, 2)
    job = helpers.claim_one(cli_app, "default")
    meta = {"done": 3, "total": 10, "raw": b"\x00"}
    assert cli_app.broker.claims.progress("default", job.id, job.token, 0.3, "fetching", dumps(meta))
    data = json.loads(invoke("job", "cliapp:app", job.id, "--json").stdout)
    check(data, JOB_SCHEMA)
    assert data["progress_meta"] == {"done": 3, "total": 10, "raw": {"$bytes": "AA=="}}
    text = invoke("job", "cliapp:app", job.id).stdout
    assert "progress     30% fetching" in text
    assert 'progress meta {"done": 3, "total": 10, "raw": {"$bytes": "AA=="}}' in text
