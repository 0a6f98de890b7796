"""The server-rendered scheduled page labels times UTC: a Europe/Paris cron's next run must be UTC."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from .conftest import http

pytestmark = [pytest.mark.redis, pytest.mark.slow]

PARIS_APP = """
from taskforge import TaskForge

app = TaskForge("dashapp")


@app.periodic(cron="*/5 * * * *", timezone="Europe/Paris")
def cleanup():
    return "clean"
"""


def test_scheduled_page_shows_a_paris_cron_in_utc(workdir: Path, start_dashboard) -> None:
    (workdir / "dashapp.py").write_text(PARIS_APP)
    before = datetime.now(timezone.utc)
    board = start_dashboard()
    status, body, _ = http(f"{board.base}/scheduled")
    after = datetime.now(timezone.utc)
    assert status == 200, body
    row = next(line for line in body.splitlines() if "cleanup" in line)
    shown = re.search(r'<time datetime="([^"]+)"[^>]*>(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) UTC</time>', row)
    assert shown, row
    assert shown[1].endswith("+00:00"), row
    when = datetime.strptime(shown[2], "%Y-%m-%d %H:%M:%S").replace(tzinfo=timezone.utc)
    # The next */5 tick after the page was drawn (between before and after; a slow start
    # may cross a tick). A Paris wall time read as UTC would be one or two hours ahead.
    assert before < when <= after + timedelta(minutes=5), row
