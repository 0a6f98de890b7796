"""``taskforge enqueue``: JSON arguments, priority, --in / --at, and every bad input."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from taskforge import JobState, Priority, TaskForge

from .conftest import one_line_error

pytestmark = pytest.mark.redis


def enqueued(app: TaskForge, result) -> str:
    assert result.exit_code == 0, result.output
    job_id = result.stdout.strip()
    assert len(job_id) == 32 and "\n" not in job_id
    return job_id


def test_prints_the_id_of_a_job_with_these_arguments(cli_app: TaskForge, invoke) -> None:
    result = invoke("enqueue", "cliapp:app", "cliapp.send", "--args", '["a@b.c"]', "--kwargs", '{"subject": "hi"}')
    info = cli_app.job(enqueued(cli_app, result)).info()
    assert (info.task, info.queue, info.priority) == ("cliapp.send", "mail", Priority.HIGH)
    assert info.args == ("a@b.c",) and info.kwargs == {"subject": "hi"} and info.state is JobState.PENDING
    assert result.stderr == ""


@pytest.mark.parametrize("given", ["critical", "CRITICAL", "3"])
def test_priority_by_name_or_number(cli_app: TaskForge, invoke, given: str) -> None:
    result = invoke("enqueue", "cliapp:app", "cliapp.add", "--args", "[1, 2]", "--priority", given)
    assert cli_app.job(enqueued(cli_app, result)).info().priority is Priority.CRITICAL


def test_in_seconds_schedules(cli_app: TaskForge, invoke) -> None:
    info = cli_app.job(
        enqueued(cli_app, invoke("enqueue", "cliapp:app", "cliapp.add", "--args", "[1, 2]", "--in", "30"))
    ).info()
    assert info.state is JobState.SCHEDULED
    assert 25 < (info.scheduled_at - info.created_at).total_seconds() <= 30.5


@pytest.mark.parametrize("suffix, offset", [("Z", timedelta(0)), ("+02:00", timedelta(hours=2)), ("", timedelta(0))])
def test_at_iso_time_schedules(cli_app: TaskForge, invoke, suffix: str, offset: timedelta) -> None:
    local = (datetime.now(timezone.utc) + offset + timedelta(hours=1)).replace(microsecond=0, tzinfo=None)
    result = invoke("enqueue", "cliapp:app", "cliapp.add", "--args", "[1, 2]", "--at", local.isoformat() + suffix)
    info = cli_app.job(enqueued(cli_app, result)).info()
    assert info.state is JobState.SCHEDULED
    assert info.scheduled_at == local.replace(tzinfo=timezone.utc) - offset  # no offset means UTC


@pytest.mark.parametrize("given", [[], ["--args", "[1, 2, 3]"], ["--args", "[1]", "--kwargs", '{"z": 1}']])
def test_arguments_the_task_cannot_take_exit_2_and_queue_nothing(cli_app: TaskForge, invoke, given: list[str]) -> None:
    result = invoke("enqueue", "cliapp:app", "cliapp.add", *given)
    assert result.exit_code == 2 and one_line_error(result).startswith("Error: cliapp.add: ")
    assert "the job was not queued" in one_line_error(result)
    assert cli_app.broker.inspection.counts("default")["pending"] == 0


def test_unregistered_task_is_queued_with_a_warning(cli_app: TaskForge, invoke) -> None:
    result = invoke("enqueue", "cliapp:app", "somewhere.else")
    assert cli_app.job(enqueued(cli_app, result)).info().task == "somewhere.else"
    assert "no task named 'somewhere.else'" in one_line_error(result)


@pytest.mark.parametrize(
    "args, culprit",
    [
        (["--args", "[1,"], "--args is not valid JSON"),
        (["--args", '{"a": 1}'], "--args must be an array"),
        (["--kwargs", "[1]"], "--kwargs must be an object"),
        (["--kwargs", "nope"], "--kwargs is not valid JSON"),
        (["--priority", "urgent"], "unknown priority 'urgent'"),
        (["--priority", "7"], "unknown priority 7"),
        (["--at", "next tuesday"], "--at 'next tuesday' is not an ISO 8601 time"),
        (["--in", "soon"], "--in 'soon'"),
        (["--in", "-1"], "--in '-1'"),
        (["--in", "nan"], "--in 'nan'"),
        (["--in", "5", "--at", "2030-01-01T00:00:00"], "--in or --at, not both"),
    ],
)
def test_bad_input_exits_2_with_one_line(cli_app: TaskForge, invoke, args: list[str], culprit: str) -> None:
    result = invoke("enqueue", "cliapp:app", "cliapp.add", *args)
    assert result.exit_code == 2
    assert culprit in one_line_error(result)
    assert cli_app.broker.inspection.counts("default")["pending"] == 0


def test_bad_app_exits_2(cli_app: TaskForge, invoke) -> None:
    result = invoke("enqueue", "cliapp", "cliapp.add", "--args", "[1, 2]")
    assert result.exit_code == 0  # module alone means attribute app
    result = invoke("enqueue", "not a module", "cliapp.add")
    assert result.exit_code == 2 and "not of the form module:attribute" in one_line_error(result)
