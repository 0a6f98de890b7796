"""``taskforge dead APP list | retry | purge``."""

from __future__ import annotations

import dataclasses
import importlib
import json
import time

import pytest

from taskforge import JobInfo, JobState, TaskForge

from . import helpers
from .conftest import one_line_error
from .schema import JOB_SCHEMA, check

pytestmark = pytest.mark.redis

# The package attribute `purge` is the click command; the module is reached by its full name.
purge_module = importlib.import_module("taskforge.cli.purge")


def three_dead(app: TaskForge) -> list[str]:
    """Oldest first: two in default, one in mail (times of death ms apart, so the order is defined)."""
    ids = [helpers.dead(app, "cliapp.add", 1, 1, error="RuntimeError: first")]
    time.sleep(0.005)
    ids.append(helpers.dead(app, "cliapp.send", "a@b.c", queue="mail", error="OSError: second"))
    time.sleep(0.005)
    ids.append(helpers.dead(app, "cliapp.add", 2, 2, error="ValueError: " + "x" * 200))
    return ids


def test_list_is_newest_first_across_queues(cli_app: TaskForge, invoke) -> None:
    ids = three_dead(cli_app)
    result = invoke("dead", "cliapp:app", "list")
    assert result.exit_code == 0, result.output
    rows = result.stdout.splitlines()
    assert rows[0].split()[:5] == ["ID", "QUEUE", "TASK", "DIED", "ATTEMPTS"]
    assert [row.split()[0] for row in rows[1:]] == list(reversed(ids))
    assert "OSError: second" in result.stdout
    assert max(len(row) for row in rows) < 200  # long errors are cut to one short line


def test_list_json_limit_and_queue(cli_app: TaskForge, invoke) -> None:
    ids = three_dead(cli_app)
    data = json.loads(invoke("dead", "cliapp:app", "list", "--limit", "2", "--json").stdout)
    assert [job["id"] for job in data] == [ids[2], ids[1]]
    for job in data:
        check(job, JOB_SCHEMA)
        assert list(job) == [f.name for f in dataclasses.fields(JobInfo)] and job["state"] == "dead"
    mail = json.loads(invoke("dead", "cliapp:app", "list", "--queue", "mail", "--json").stdout)
    assert [job["id"] for job in mail] == [ids[1]]


def test_list_when_empty(cli_app: TaskForge, invoke) -> None:
    assert invoke("dead", "cliapp:app", "list").stdout.strip() == "no dead jobs"
    assert json.loads(invoke("dead", "cliapp:app", "list", "--json").stdout) == []


def test_retry_ids_puts_them_back_in_line(cli_app: TaskForge, invoke) -> None:
    ids = three_dead(cli_app)
    result = invoke("dead", "cliapp:app", "retry", ids[0], ids[1])
    assert result.exit_code == 0, result.output
    assert "retried 2 dead jobs" in result.stdout
    assert cli_app.job(ids[0]).status() is JobState.PENDING
    assert cli_app.job(ids[1]).status() is JobState.PENDING
    assert cli_app.job(ids[0]).info().attempts == 0
    assert cli_app.job(ids[2]).status() is JobState.DEAD


def test_retry_all(cli_app: TaskForge, invoke) -> None:
    ids = three_dead(cli_app)
    result = invoke("dead", "cliapp:app", "retry", "--all")
    assert result.exit_code == 0 and "retried 3 dead jobs" in result.stdout
    assert all(cli_app.job(i).status() is JobState.PENDING for i in ids)


def test_retry_checks_every_id_before_retrying_any(cli_app: TaskForge, invoke) -> None:
    ids = three_dead(cli_app)
    result = invoke("dead", "cliapp:app", "retry", ids[0], "f" * 32)
    assert result.exit_code == 2 and "no job ffff" in one_line_error(result)
    assert cli_app.job(ids[0]).status() is JobState.DEAD
    pending = cli_app.tasks["cliapp.add"].delay(5, 5)
    result = invoke("dead", "cliapp:app", "retry", pending.id)
    assert result.exit_code == 2 and "is pending, not dead" in one_line_error(result)


@pytest.mark.parametrize("args", [[], ["abc", "--all"]])
def test_retry_needs_ids_or_all(cli_app: TaskForge, invoke, args: list[str]) -> None:
    result = invoke("dead", "cliapp:app", "retry", *args)
    assert result.exit_code == 2 and "JOB_ID" in one_line_error(result)


def test_purge_refuses_without_yes_off_a_terminal(cli_app: TaskForge, invoke) -> None:
    three_dead(cli_app)
    result = invoke("dead", "cliapp:app", "purge")
    assert result.exit_code == 2 and "--yes" in one_line_error(result)
    assert cli_app.broker.inspection.counts("default")["dead"] == 2


def test_purge_with_yes_or_a_confirmation(cli_app: TaskForge, invoke, monkeypatch) -> None:
    ids = three_dead(cli_app)
    result = invoke("dead", "cliapp:app", "purge", "--queue", "mail", "--yes")
    assert result.exit_code == 0 and "deleted 1 dead job" in result.stdout
    monkeypatch.setattr(purge_module, "stdin_is_terminal", lambda: True)
    assert invoke("dead", "cliapp:app", "purge", input="n\n").exit_code == 1
    assert cli_app.broker.inspection.counts("default")["dead"] == 2
    result = invoke("dead", "cliapp:app", "purge", input="y\n")
    assert result.exit_code == 0 and "deleted 2 dead jobs" in result.stdout
    assert cli_app.broker.inspection.counts("default")["dead"] == 0
    assert invoke("job", "cliapp:app", ids[0]).exit_code == 2
    assert invoke("dead", "cliapp:app", "purge").stdout.strip() == "no dead jobs to purge"


def test_dead_without_subcommand_is_a_usage_error(cli_app: TaskForge, invoke) -> None:
    assert invoke("dead", "cliapp:app").exit_code == 2
    assert invoke("dead", "nosuch:app", "list").exit_code == 2
