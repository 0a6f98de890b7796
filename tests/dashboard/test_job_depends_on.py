"""The dashboard's job page shows what a job given ``depends_on`` waits for, with each parent's state."""

from __future__ import annotations

import re

import pytest

from taskforge import TaskForge

from .conftest import http

pytestmark = [pytest.mark.redis, pytest.mark.slow]


def test_the_job_page_shows_what_a_deferred_job_waits_for(start_dashboard, producer: TaskForge) -> None:
    @producer.task(name="dashapp.add")
    def add(x: int, y: int) -> int:
        return x + y

    parent = add.delay(1, 2)
    child = add.apply_async((3, 4), depends_on=parent)
    board = start_dashboard()
    status, body, _ = http(f"{board.base}/jobs/{child.id}?queue=default")
    assert status == 200, body
    assert "<h2>Waits for</h2>" in body
    table = re.search(r'<table class="card" id="parents">(.*?)</table>', body, re.S)
    assert table is not None, body
    assert parent.id in table[1] and "state-pending" in table[1]
    status, body, _ = http(f"{board.base}/jobs/{parent.id}?queue=default")
    assert status == 200 and 'id="parents"' not in body
