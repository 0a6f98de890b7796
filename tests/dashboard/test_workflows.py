"""The dashboard's workflows: a page per workflow, the list reached from the overview, their JSON."""

from __future__ import annotations

import html
import json
import re

import pytest

from taskforge import TaskForge, chain, group

from .conftest import http
from .test_http import cli_json

pytestmark = [pytest.mark.redis, pytest.mark.slow]

ERROR = "RuntimeError: <b>exploded</b> & gone"


def tasks(producer: TaskForge):
    """Real bodies under the dashboard app's task names: ``producer.drain()`` runs the steps here."""

    @producer.task(name="dashapp.add")
    def add(a, b=0):
        return a + b

    @producer.task(name="dashapp.fails_first", max_attempts=1)
    def explode(value):
        raise RuntimeError("<b>exploded</b> & gone")

    @producer.task(name="dashapp.later", queue="backlog")
    def later(n):
        return n

    return add, explode, later


def step_rows(body: str) -> list[str]:
    return re.findall(r'<tr data-step="([^"]+)"', body)


def test_a_workflow_page_shows_its_steps_in_order_and_what_holds_it_up(
    start_dashboard, producer: TaskForge, workdir, redis_url: str
) -> None:
    add, explode, later = tasks(producer)
    dead = chain(add.s(1, 2), explode.s(), add.s(5), on_failure=later.si(7)).delay()
    producer.drain()
    running = chain(add.s(1, 2), group(add.s(10), add.s(20))).delay()
    board = start_dashboard()

    status, body, _ = http(f"{board.base}/workflows/{dead.id}")
    assert status == 200, body
    ids = [f"{dead.id}.{i}" for i in range(4)]
    assert step_rows(body) == ids
    states = re.findall(r'<td><span class="state state-(\w+)">', body)
    assert states == ["succeeded", "dead", "cancelled", "succeeded"]
    for step_id, queue in ((ids[0], "default"), (ids[1], "default"), (ids[3], "backlog")):
        assert f'href="/jobs/{step_id}?queue={queue}"' in body  # each step sent links to its job page
    assert f'href="/jobs/{ids[2]}' not in body and body.count("not sent") == 1  # cancelled before it was sent
    held = re.search(r'<dd id="held">(.*?)</dd>', body, re.S)
    assert held is not None and f"/jobs/{ids[1]}?queue=default" in held[1] and "dashapp.fails_first" in held[1]
    assert re.search(rf'<tr data-step="{re.escape(ids[1])}" class="held">', body)
    assert body.count('class="held"') == 1 and "on_failure" in body
    assert html.escape(ERROR) in body and "<b>exploded" not in body  # the error is text, never markup

    # Running: held up by the first step not succeeded; steps not sent yet are listed, without a link.
    status, body, _ = http(f"{board.base}/workflows/{running.id}")
    assert status == 200 and step_rows(body) == [f"{running.id}.{i}" for i in range(3)]
    held = re.search(r'<dd id="held">(.*?)</dd>', body, re.S)
    assert held is not None and f"/jobs/{running.id}.0?queue=default" in held[1]
    assert body.count("not sent") == 2 and f'href="/jobs/{running.id}.1' not in body

    # The API serves what `taskforge workflow --json` prints.
    status, body, _ = http(f"{board.base}/api/workflows/{dead.id}")
    assert status == 200
    assert json.loads(body) == cli_json(workdir, redis_url, "workflow", "dashapp:app", dead.id)

    status, body, _ = http(f"{board.base}/workflows/{'0' * 32}")
    assert status == 404 and f"no workflow {'0' * 32}" in body
    status, body, _ = http(f"{board.base}/api/workflows/{'0' * 32}")
    assert status == 404 and json.loads(body)["error"].startswith(f"no workflow {'0' * 32}")


def test_recent_workflows_are_listed_and_reached_from_the_overview(start_dashboard, producer: TaskForge) -> None:
    add, explode, _ = tasks(producer)
    succeeded = chain(add.s(1, 2), add.s(3)).delay()
    dead = chain(explode.s(1), add.s(2)).delay()
    producer.drain()
    cancelled = chain(add.s(1, 2), add.s(3)).delay()
    assert cancelled.cancel()
    running = group(add.s(1, 1), add.s(2, 2)).delay()
    board = start_dashboard()

    status, body, _ = http(board.base + "/")
    assert status == 200 and 'href="/workflows"' in body
    counts = re.search(r'<table class="grid compact" id="workflow-counts">(.*?)</table>', body, re.S)
    assert counts is not None
    assert re.findall(r">(\d+)</a></td>", counts[1]) == ["1", "1", "1", "1"]

    status, body, _ = http(board.base + "/workflows")
    assert status == 200
    for state, handle in (("running", running), ("succeeded", succeeded), ("dead", dead), ("cancelled", cancelled)):
        table = re.search(rf'<table class="grid compact" id="workflows-{state}">(.*?)</table>', body, re.S)
        assert table is not None and re.findall(r'<tr data-workflow="(\w+)">', table[1]) == [handle.id], state
        assert f'href="/workflows/{handle.id}"' in table[1]
    assert html.escape(ERROR) in body

    status, body, _ = http(board.base + "/api/workflows?limit=5")
    listing = json.loads(body)
    assert status == 200 and listing["counts"] == {"running": 1, "succeeded": 1, "dead": 1, "cancelled": 1}
    assert {state: [w["id"] for w in rows] for state, rows in listing["workflows"].items()} == {
        "running": [running.id],
        "succeeded": [succeeded.id],
        "dead": [dead.id],
        "cancelled": [cancelled.id],
    }
    (row,) = listing["workflows"]["dead"]
    assert row["failed_step"] == f"{dead.id}.0" and row["error"] == ERROR and row["first_task"] == "dashapp.fails_first"
    assert row["steps"] == 2 and row["finished_at"] is not None
    assert json.loads(http(board.base + "/api/status")[1])["workflows"] == listing["counts"]
    status, body, _ = http(board.base + "/api/workflows?limit=0")
    assert status == 400 and "limit '0'" in json.loads(body)["error"]


def test_a_dead_workflows_page_retries_it(start_dashboard, producer: TaskForge) -> None:
    add, explode, later = tasks(producer)
    dead = chain(add.s(1, 2), explode.s(), add.s(5)).delay()
    producer.drain()
    board = start_dashboard()
    status, body, headers = http(f"{board.base}/workflows/{dead.id}")
    assert status == 200 and 'data-action="retry-workflow"' in body
    cookie = re.search(r"taskforge_csrf=(\w+)", headers["set-cookie"])[1]
    token = re.search(r'name="csrf" value="(\w+)"', body)[1]
    url = f"{board.base}/workflows/{dead.id}/retry"
    assert http(url, b"csrf=" + token.encode(), {})[0] == 403  # no cookie: refused, nothing done
    assert dead.status().value == "dead"
    sent = {"Cookie": f"taskforge_csrf={cookie}", "Origin": board.base}
    status, _, headers = http(url, f"csrf={token}".encode(), sent)
    assert status == 303 and headers["location"] == f"/workflows/{dead.id}"
    assert dead.status().value == "running"
    _, body, _ = http(f"{board.base}/workflows/{dead.id}")
    assert 'data-action="retry-workflow"' not in body and f"{dead.id}.1" in body
    status, body, _ = http(url, f"csrf={token}".encode(), sent)
    assert status == 409 and "running, not dead" in html.unescape(body)
    producer.drain()  # explode still explodes: dead again
    assert dead.status().value == "dead"
