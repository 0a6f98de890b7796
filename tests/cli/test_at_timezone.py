"""``taskforge enqueue --at``: a time without an offset is read in the app's time zone, as ``apply_at`` reads it."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

import pytest

from taskforge import JobState, TaskForge
from taskforge.loader import load_app
from taskforge.zones import NAIVE_WARNED

pytestmark = pytest.mark.redis

TOKYO_APP = """
from taskforge import TaskForge

app = TaskForge("tokyoapp", timezone="Asia/Tokyo")


@app.task
def add(x, y):
    return x + y
"""


@pytest.fixture
def tokyo_app(tmp_path: Path, redis_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[TaskForge]:
    (tmp_path / "tokyoapp.py").write_text(TOKYO_APP)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("TASKFORGE_BROKER_URL", redis_url)
    sys.modules.pop("tokyoapp", None)
    NAIVE_WARNED.clear()
    yield load_app("tokyoapp:app")
    sys.modules.pop("tokyoapp", None)
    NAIVE_WARNED.clear()


def naive_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and "naive" in r.getMessage()]


def test_at_without_offset_is_in_the_apps_time_zone(tokyo_app: TaskForge, invoke, caplog) -> None:
    result = invoke("enqueue", "tokyoapp:app", "tokyoapp.add", "--args", "[1, 2]", "--at", "2031-06-01T21:30:00")
    assert result.exit_code == 0, result.output
    info = tokyo_app.job(result.stdout.strip()).info()
    assert info.state is JobState.SCHEDULED
    assert info.scheduled_at == datetime(2031, 6, 1, 12, 30, tzinfo=timezone.utc)
    assert naive_warnings(caplog) == []


def test_at_without_offset_or_app_time_zone_is_utc_and_warns_once(cli_app: TaskForge, invoke, caplog) -> None:
    NAIVE_WARNED.clear()
    ids = []
    for minute in ("30", "31"):
        result = invoke("enqueue", "cliapp:app", "cliapp.add", "--args", "[1, 2]", "--at", f"2031-06-01T12:{minute}")
        assert result.exit_code == 0, result.output
        ids.append(result.stdout.strip())
    assert cli_app.job(ids[0]).info().scheduled_at == datetime(2031, 6, 1, 12, 30, tzinfo=timezone.utc)
    [warning] = naive_warnings(caplog)
    assert "TaskForge(timezone=" in warning
    NAIVE_WARNED.clear()
