"""Times labelled UTC are UTC: a Europe/Paris cron's next run, in ``status`` text and ``--json``."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from taskforge.cli.table import timestamp

PARIS_APP = """
from taskforge import TaskForge

app = TaskForge("parisapp", broker="memory://")


@app.periodic(cron="*/5 * * * *", timezone="Europe/Paris")
def cleanup():
    return "clean"
"""

FIVE_MINUTES = timedelta(minutes=5)


@pytest.fixture
def paris_app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    (tmp_path / "parisapp.py").write_text(PARIS_APP)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("parisapp", None)
    yield "parisapp:app"
    sys.modules.pop("parisapp", None)


def test_json_gives_the_next_run_as_utc(paris_app: str, invoke) -> None:
    result = invoke("status", paris_app, "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    (periodic,) = data["periodic"]
    assert periodic["next_run"].endswith("+00:00"), periodic["next_run"]
    assert data["generated_at"].endswith("+00:00"), data["generated_at"]
    ahead = datetime.fromisoformat(periodic["next_run"]) - datetime.fromisoformat(data["generated_at"])
    assert timedelta(0) < ahead <= FIVE_MINUTES


def test_text_prints_the_utc_wall_time(paris_app: str, invoke) -> None:
    before = datetime.now(timezone.utc)
    result = invoke("status", paris_app)
    assert result.exit_code == 0, result.output
    row = next(line for line in result.stdout.splitlines() if "cleanup" in line)
    printed = re.search(r"\((\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) UTC\)", row)
    assert printed, row
    when = datetime.strptime(printed[1], "%Y-%m-%d %H:%M:%S").replace(tzinfo=timezone.utc)
    # A Paris wall time read as UTC would be one or two hours ahead.
    assert timedelta(0) < when - before <= FIVE_MINUTES, row


def test_timestamp_converts_another_zone_to_utc() -> None:
    paris = datetime(2027, 1, 1, 9, 15, tzinfo=timezone(timedelta(hours=1)))
    assert timestamp(paris) == "2027-01-01 08:15:00 UTC"
