"""``taskforge pause`` and ``taskforge resume``, and the pause in ``taskforge status`` (text and --json)."""

from __future__ import annotations

import json

import pytest

from taskforge import TaskForge

from .conftest import one_line_error

pytestmark = pytest.mark.redis


def test_pause_then_resume_a_queue(cli_app: TaskForge, invoke) -> None:
    result = invoke("pause", "cliapp:app", "mail")
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == "queue mail paused"
    assert cli_app.paused() == {"mail"}
    assert invoke("pause", "cliapp:app", "mail").stdout.strip() == "queue mail was already paused"
    result = invoke("resume", "cliapp:app", "mail")
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == "queue mail resumed"
    assert cli_app.paused() == set()
    assert invoke("resume", "cliapp:app", "mail").stdout.strip() == "queue mail was not paused"


def test_status_shows_a_paused_queue(cli_app: TaskForge, invoke) -> None:
    cli_app.tasks["cliapp.add"].delay(1, 2)
    cli_app.pause("default")
    text = invoke("status", "cliapp:app")
    assert text.exit_code == 0, text.output
    row = next(line for line in text.stdout.splitlines() if line.startswith("default"))
    assert row.startswith("default (paused)")
    assert not any(line.startswith("mail (paused)") for line in text.stdout.splitlines())
    document = json.loads(invoke("status", "cliapp:app", "--json").stdout)
    assert {q["name"]: q["paused"] for q in document["queues"]}["default"] is True
    assert all(q["paused"] is False for q in document["queues"] if q["name"] != "default")


@pytest.mark.parametrize("command", ["pause", "resume"])
def test_bad_arguments_exit_2_with_one_line(cli_app: TaskForge, invoke, command: str) -> None:
    result = invoke(command, "cliapp:app", "a{b")
    assert result.exit_code == 2, result.output
    assert "queue name 'a{b'" in one_line_error(result)
    assert invoke(command, "cliapp:app").exit_code == 2  # no queue
    assert invoke(command, "nosuchmodule:app", "mail").exit_code == 2
    assert cli_app.paused() == set()
