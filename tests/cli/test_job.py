"""``taskforge job``: the whole record, JSON with the JobInfo field names, errors."""

from __future__ import annotations

import dataclasses
import json
import math
import re
import uuid
from datetime import date, datetime, time, timedelta, timezone
from decimal import Decimal

import pytest

from taskforge import JobInfo, TaskForge
from taskforge.job_json import jsonable

from . import helpers
from .conftest import one_line_error
from .schema import JOB_SCHEMA, check

pytestmark = pytest.mark.redis

ODD_RESULT = {
    "bytes": b"\x00\xff",
    "when": datetime(2027, 1, 2, 3, 4, 5, tzinfo=timezone(timedelta(hours=2))),
    "day": date(2027, 1, 2),
    "tuple": (1, "a"),
    "set": {3, 1, 2},
    1: "int key",
    None: "none key",
    "money": Decimal("1.50"),
    "id": uuid.UUID(int=1),
    "span": timedelta(minutes=1, microseconds=500),
    "nan": math.nan,
    "inf": -math.inf,
}


def test_json_has_exactly_the_jobinfo_fields(cli_app: TaskForge, invoke) -> None:
    job_id = helpers.succeeded(cli_app, "cliapp.add", ODD_RESULT, 1, 2)
    result = invoke("job", "cliapp:app", job_id, "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert list(data) == [f.name for f in dataclasses.fields(JobInfo)]
    check(data, JOB_SCHEMA)
    assert data["id"] == job_id and data["task"] == "cliapp.add" and data["state"] == "succeeded"
    assert data["args"] == [1, 2] and data["kwargs"] == {} and data["priority"] == "normal"
    assert data["attempts"] == 1 and data["max_attempts"] == 3
    assert data["result"] == {
        "bytes": {"$bytes": "AP8="},
        "when": "2027-01-02T03:04:05+02:00",
        "day": "2027-01-02",
        "tuple": [1, "a"],
        "set": [1, 2, 3],
        "1": "int key",
        "null": "none key",
        "money": "1.50",
        "id": "00000000-0000-0000-0000-000000000001",
        "span": 60.0005,
        "nan": "NaN",
        "inf": "-Infinity",
    }


def test_human_output_shows_the_record(cli_app: TaskForge, invoke) -> None:
    job_id = helpers.dead(cli_app, "cliapp.send", "a@b.c", queue="mail", error="RuntimeError: smtp down")
    result = invoke("job", "cliapp:app", job_id)
    assert result.exit_code == 0, result.output
    out = result.stdout
    for expected in (
        job_id,
        "cliapp.send",
        "mail",
        "dead",
        "high",
        "1 of 3",
        "('a@b.c',)",
        "RuntimeError: smtp down",
        "Traceback (most recent call last)",
    ):
        assert expected in out
    assert "\x1b[" not in out


def test_pending_job_has_null_times_and_result(cli_app: TaskForge, invoke) -> None:
    handle = cli_app.tasks["cliapp.send"].delay("x@y.z", subject="hi")
    data = json.loads(invoke("job", "cliapp:app", handle.id, "--json").stdout)
    assert data["state"] == "pending" and data["kwargs"] == {"subject": "hi"}
    assert data["started_at"] is None and data["finished_at"] is None and data["result"] is None


def test_headers_show_in_both_outputs(cli_app: TaskForge, invoke) -> None:
    def tenant(outgoing) -> None:
        outgoing.headers["tenant"] = "acme"

    cli_app.around_enqueue(tenant)
    try:
        handle = cli_app.tasks["cliapp.send"].delay("x@y.z")
    finally:
        cli_app.send_hooks.remove(tenant)
    assert json.loads(invoke("job", "cliapp:app", handle.id, "--json").stdout)["headers"] == {"tenant": "acme"}
    assert "header tenant" in invoke("job", "cliapp:app", handle.id).stdout
    plain = cli_app.tasks["cliapp.send"].delay("x@y.z")
    assert json.loads(invoke("job", "cliapp:app", plain.id, "--json").stdout)["headers"] == {}
    assert "header" not in invoke("job", "cliapp:app", plain.id).stdout


def test_unknown_job_id_exits_2_with_one_line(cli_app: TaskForge, invoke) -> None:
    result = invoke("job", "cliapp:app", "0" * 32)
    assert result.exit_code == 2
    assert "no job 00000000000000000000000000000000" in one_line_error(result)


def test_bad_app_exits_2(cli_app: TaskForge, invoke) -> None:
    result = invoke("job", "cliapp:nothere", "abc")
    assert result.exit_code == 2
    assert "nothere" in one_line_error(result)


def test_jsonable_renders_nested_and_non_string_keys() -> None:
    assert jsonable({(1, 2): [frozenset({"b", "a"})], True: time(12, 30)}) == {
        "[1, 2]": [["a", "b"]],
        "true": "12:30:00",
    }
    assert jsonable(1.5) == 1.5 and jsonable(math.inf) == "Infinity"
    json.dumps(jsonable(ODD_RESULT), allow_nan=False)  # strictly valid JSON


def test_the_help_names_every_json_field() -> None:
    """``job --help`` documents the --json object: a JobInfo attribute it leaves out fails here."""
    from taskforge.cli.job import JOB_HELP

    listed = JOB_HELP.split("--json prints one object", 1)[1].split("Values in args", 1)[0]
    named = set(re.findall(r"\b([a-z_]+)\b", listed))
    missing = [f.name for f in dataclasses.fields(JobInfo) if f.name not in named]
    assert not missing, f"taskforge job --help does not name these --json fields: {missing}"
