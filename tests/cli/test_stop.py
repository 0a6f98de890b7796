"""``taskforge cancel`` and ``taskforge abort``: output and exit codes for each state and unknown ids."""

from __future__ import annotations

import pytest

from taskforge import JobState, TaskForge

from . import helpers
from .conftest import one_line_error

pytestmark = pytest.mark.redis

UNKNOWN = "0123456789abcdef0123456789abcdef"


def test_cancel_a_pending_job(cli_app: TaskForge, invoke) -> None:
    handle = cli_app.tasks["cliapp.add"].delay(1, 2)
    result = invoke("cancel", "cliapp:app", handle.id)
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == (
        f"cancelled job {handle.id} (cliapp.add, queue default): it was pending and will never run"
    )
    assert handle.status() is JobState.CANCELLED


def test_cancel_a_scheduled_job(cli_app: TaskForge, invoke) -> None:
    handle = cli_app.tasks["cliapp.send"].apply_in(600, "a@b.c")
    result = invoke("cancel", "cliapp:app", handle.id)
    assert result.exit_code == 0, result.output
    assert "it was scheduled" in result.stdout and "queue mail" in result.stdout
    assert handle.status() is JobState.CANCELLED


def test_cancel_a_running_job_points_at_abort(cli_app: TaskForge, invoke) -> None:
    job_id = helpers.running(cli_app, "cliapp.add", 1, 2)
    result = invoke("cancel", "cliapp:app", job_id)
    assert result.exit_code == 1, result.output
    line = one_line_error(result)
    assert f"job {job_id} is already running" in line and "`taskforge abort`" in line, line
    assert cli_app.job(job_id).status() is JobState.RUNNING


@pytest.mark.parametrize("command", ["cancel", "abort"])
def test_a_finished_job_exits_1(cli_app: TaskForge, invoke, command: str) -> None:
    job_id = helpers.succeeded(cli_app, "cliapp.add", 3, 1, 2)
    result = invoke(command, "cliapp:app", job_id)
    assert result.exit_code == 1, result.output
    assert f"job {job_id} is already succeeded: nothing to {command}" in one_line_error(result)
    assert cli_app.job(job_id).status() is JobState.SUCCEEDED


@pytest.mark.parametrize("command", ["cancel", "abort"])
def test_an_unknown_id_exits_2(cli_app: TaskForge, invoke, command: str) -> None:
    result = invoke(command, "cliapp:app", UNKNOWN)
    assert result.exit_code == 2, result.output
    assert f"no job {UNKNOWN}" in one_line_error(result)


def test_abort_a_pending_job_cancels_it(cli_app: TaskForge, invoke) -> None:
    handle = cli_app.tasks["cliapp.add"].delay(1, 2)
    result = invoke("abort", "cliapp:app", handle.id)
    assert result.exit_code == 0, result.output
    expected = f"cancelled job {handle.id} (cliapp.add, queue default) before it started: it was pending"
    assert result.stdout.strip() == expected
    assert handle.status() is JobState.CANCELLED


def test_abort_a_running_job_flags_it_for_its_worker(cli_app: TaskForge, invoke) -> None:
    cli_app.send("cliapp.add", 1, 2)
    claim = helpers.claim_one(cli_app, "default")
    result = invoke("abort", "cliapp:app", claim.id)
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(f"abort requested for job {claim.id} (cliapp.add, queue default)"), result.stdout
    # What the supervisor running it is told at its next lease renewal.
    lost, to_abort = cli_app.broker.claims.extend("default", helpers.LEASE_MS, [(claim.id, claim.token)])
    assert (lost, to_abort) == ([], [claim.id])
