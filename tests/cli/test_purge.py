"""``taskforge purge``: deletes pending and scheduled jobs, only with consent."""

from __future__ import annotations

import importlib

import pytest

from taskforge import JobState, TaskForge

from . import helpers
from .conftest import one_line_error

pytestmark = pytest.mark.redis

# The package attribute `purge` is the click command; the module is reached by its full name.
purge_module = importlib.import_module("taskforge.cli.purge")


def fill(app: TaskForge) -> dict[str, str]:
    ids = {
        "running": helpers.running(app, "cliapp.add", 0, 0),
        "retrying": helpers.retrying(app, "cliapp.add", 1, 1),
        "dead": helpers.dead(app, "cliapp.add", 2, 2),
    }
    ids["pending"] = app.tasks["cliapp.add"].delay(3, 3).id
    ids["scheduled"] = app.tasks["cliapp.add"].apply_in(60, 4, 4).id
    ids["mail"] = app.tasks["cliapp.send"].delay("a@b.c").id
    return ids


def test_yes_deletes_queued_jobs_only(cli_app: TaskForge, invoke) -> None:
    ids = fill(cli_app)
    result = invoke("purge", "cliapp:app", "--yes")
    assert result.exit_code == 0, result.output
    assert "default: deleted 1 pending, 2 scheduled" in result.stdout
    assert "mail: deleted 1 pending, 0 scheduled" in result.stdout
    for gone in ("pending", "scheduled", "retrying", "mail"):
        assert invoke("job", "cliapp:app", ids[gone]).exit_code == 2
    assert cli_app.job(ids["running"]).status() is JobState.RUNNING
    assert cli_app.job(ids["dead"]).status() is JobState.DEAD


def test_queue_option_limits_the_purge(cli_app: TaskForge, invoke) -> None:
    ids = fill(cli_app)
    result = invoke("purge", "cliapp:app", "--queue", "mail", "--yes")
    assert result.exit_code == 0 and "default" not in result.stdout
    assert cli_app.job(ids["pending"]).status() is JobState.PENDING
    assert invoke("job", "cliapp:app", ids["mail"]).exit_code == 2


def test_refuses_without_yes_when_stdin_is_not_a_terminal(cli_app: TaskForge, invoke) -> None:
    ids = fill(cli_app)
    result = invoke("purge", "cliapp:app")
    assert result.exit_code == 2
    line = one_line_error(result)
    assert "refusing to delete 4 queued jobs (default: 1 pending, 2 scheduled; mail: 1 pending)" in line
    assert "without --yes" in line
    assert cli_app.job(ids["pending"]).status() is JobState.PENDING


def test_asks_on_a_terminal(cli_app: TaskForge, invoke, monkeypatch) -> None:
    ids = fill(cli_app)
    monkeypatch.setattr(purge_module, "stdin_is_terminal", lambda: True)
    declined = invoke("purge", "cliapp:app", input="n\n")
    assert declined.exit_code == 1 and "Delete 4 queued jobs" in declined.stderr
    assert cli_app.job(ids["pending"]).status() is JobState.PENDING
    accepted = invoke("purge", "cliapp:app", input="y\n")
    assert accepted.exit_code == 0 and "deleted" in accepted.stdout
    assert cli_app.broker.inspection.counts("default")["pending"] == 0


def test_nothing_to_purge_asks_nothing(cli_app: TaskForge, invoke) -> None:
    result = invoke("purge", "cliapp:app")
    assert result.exit_code == 0 and "nothing to purge" in result.stdout


def test_bad_queue_name_exits_2(cli_app: TaskForge, invoke) -> None:
    result = invoke("purge", "cliapp:app", "--queue", "a{b}", "--yes")
    assert result.exit_code == 2 and "'{'" in one_line_error(result)
