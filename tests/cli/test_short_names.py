"""A task's short name in the CLI: resolved when one registered task has it, refused when several do."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from taskforge import JobState, TaskForge
from taskforge.loader import load_app

from .conftest import one_line_error

pytestmark = pytest.mark.redis

SHORT_APP = """
from taskforge import TaskForge

app = TaskForge("shortapp")


@app.task
def add(x, y):
    return x + y


@app.task
def send(to):
    return to


@app.task(name="billing.send")
def send_invoice(to):
    return to
"""


@pytest.fixture
def short_app(tmp_path: Path, redis_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[TaskForge]:
    (tmp_path / "shortapp.py").write_text(SHORT_APP)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("TASKFORGE_BROKER_URL", redis_url)
    sys.modules.pop("shortapp", None)
    yield load_app("shortapp:app")
    sys.modules.pop("shortapp", None)


def test_enqueue_resolves_a_unique_short_name(short_app: TaskForge, invoke) -> None:
    result = invoke("enqueue", "shortapp:app", "add", "--args", "[1, 2]")
    assert result.exit_code == 0 and result.stderr == "", result.output
    assert short_app.job(result.stdout.strip()).info().task == "shortapp.add"


@pytest.mark.parametrize("command", [["enqueue", "shortapp:app", "send"], ["jobs", "shortapp:app", "--task", "send"]])
def test_an_ambiguous_short_name_exits_2_listing_the_candidates(
    short_app: TaskForge, invoke, command: list[str]
) -> None:
    result = invoke(*command)
    error = one_line_error(result)
    assert result.exit_code == 2 and "'send'" in error
    assert "billing.send" in error and "shortapp.send" in error
    assert short_app.broker.inspection.counts("default")["pending"] == 0


def test_jobs_task_filter_takes_the_short_name(short_app: TaskForge, invoke) -> None:
    mine = short_app.send("shortapp.add", 1, 2).id
    short_app.send("billing.send", "a@b.c")
    for name in ("add", "shortapp.add"):
        found = json.loads(invoke("jobs", "shortapp:app", "--task", name, "--json").stdout)
        assert [job["id"] for job in found["jobs"]] == [mine]
    gone = invoke("jobs", "shortapp:app", "--task", "retired.task")  # a name of the past: no match, no error
    assert gone.exit_code == 0 and gone.stdout.strip() == "no jobs match"


@pytest.mark.parametrize("given, seconds", [("90s", 90), ("15m", 900), ("2h", 7200), ("1d", 86400), ("45", 45)])
def test_in_takes_the_durations_since_takes(short_app: TaskForge, invoke, given: str, seconds: int) -> None:
    result = invoke("enqueue", "shortapp:app", "shortapp.add", "--args", "[1, 2]", "--in", given)
    assert result.exit_code == 0, result.output
    info = short_app.job(result.stdout.strip()).info()
    assert info.state is JobState.SCHEDULED
    assert seconds - 5 < (info.scheduled_at - info.created_at).total_seconds() <= seconds + 0.5
