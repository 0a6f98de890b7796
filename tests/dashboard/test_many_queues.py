"""The overview over many queues: a page of 100 at a time, every queue reachable."""

from __future__ import annotations

import re

import pytest

from taskforge import TaskForge

from .conftest import http

pytestmark = [pytest.mark.redis, pytest.mark.slow]


def test_the_overview_pages_its_queues(start_dashboard, producer: TaskForge) -> None:
    one = producer.task(name="dashapp.one")(lambda n: n)
    for n in range(150):
        one.with_options(queue=f"oneoff-{n:03d}").delay(n)
    dashboard = start_dashboard()

    def rows(query: str) -> list[str]:
        status, body, _ = http(f"{dashboard.base}/{query}")
        assert status == 200, body
        return re.findall(r'<tr data-queue="([^"]+)"', body)

    first, second = rows(""), rows("?page=2")
    assert len(first) == 100 and second  # the app's own queues come first, then these
    assert set(first).isdisjoint(second)
    assert {f"oneoff-{n:03d}" for n in range(150)} <= set(first) | set(second)
    assert rows("?page=9") == second  # past the last page: the last
    status, body, _ = http(f"{dashboard.base}/?page=0")
    assert status == 400 and "use a whole number from 1" in body
