"""The dashboard's search, its bulk actions and ``GET /api/jobs`` over plain HTTP, against a real dashboard process.

Jobs are left pending (no worker) or made dead by the queue's own scripts,
so every count is exact; ``test_search_browser.py`` drives the same pages in
Chromium against a real worker.
"""

from __future__ import annotations

import html
import json
import re
import time
from typing import Any
from urllib.parse import urlencode

import pytest

from taskforge import JobState, TaskForge

from .conftest import http
from .test_http import dead_job

pytestmark = [pytest.mark.redis, pytest.mark.slow]


@pytest.fixture
def jobs(producer: TaskForge) -> dict[str, Any]:
    """Two dead jobs, six pending ``add`` jobs keyed by customer, three in ``backlog``; a few ms apart."""

    @producer.task(name="dashapp.later", queue="backlog")
    def later(n): ...

    dead = []
    for _ in range(2):
        dead.append(dead_job(producer))  # first: dead_job takes the oldest pending job of the queue
        time.sleep(0.002)
    add = producer.task_for("dashapp.add")
    keyed = []
    for n in range(6):
        keyed.append(add.with_options(key=f"cust-{n % 2}").delay(n, 7_340_910 + n).id)
        time.sleep(0.002)
    backlog = []
    for n in range(3):
        backlog.append(later.delay(n).id)
        time.sleep(0.002)
    return {"dead": dead, "keyed": keyed, "backlog": backlog}


def rows(body: str) -> list[str]:
    """The job ids of a search page's results, in order."""
    return re.findall(r'<tr data-job="([^"]+)"', body)


def search(board: Any, **params: str) -> tuple[int, str]:
    status, body, _ = http(f"{board.base}/search?{urlencode(params)}")
    return status, body


def api(board: Any, **params: str) -> tuple[int, Any]:
    status, body, _ = http(f"{board.base}/api/jobs?{urlencode(params)}")
    return status, json.loads(body)


def newest_first(ids: list[str]) -> list[str]:
    return list(reversed(ids))


def test_each_filter_on_the_page_and_in_the_api(start_dashboard, jobs: dict[str, Any]) -> None:
    board = start_dashboard()
    every = newest_first(jobs["dead"] + jobs["keyed"] + jobs["backlog"])
    cust0 = newest_first(jobs["keyed"][0::2])
    cases = [
        ({}, every),
        ({"state": "dead"}, newest_first(jobs["dead"])),
        ({"queue": "backlog"}, newest_first(jobs["backlog"])),
        ({"task": "dashapp.add"}, newest_first(jobs["keyed"])),
        ({"task": "dashapp.add", "key": "cust-0"}, cust0),
        ({"key": "cust-0", "state": "pending", "queue": "default"}, cust0),
        ({"match": "7340915"}, [jobs["keyed"][5]]),  # an argument's digits
        ({"match": "VALUEERROR: X"}, newest_first(jobs["dead"])),  # the error, any case
        ({"since": "1h", "task": "dashapp.later"}, newest_first(jobs["backlog"])),
        ({"state": "succeeded"}, []),
        # Empty fields are what a form sends for a filter left blank: not given.
        (
            {"queue": "", "state": "", "task": "dashapp.later", "key": "", "match": "", "since": ""},
            newest_first(jobs["backlog"]),
        ),
    ]
    for params, expected in cases:
        status, body = search(board, **params)
        assert status == 200, (params, body)
        assert rows(body) == expected, params
        status, document = api(board, **params)
        assert status == 200, (params, document)
        assert [j["id"] for j in document["jobs"]] == expected, params
        assert document["cursor"] is None
    _, document = api(board, key="cust-1", limit="1")
    first = document["jobs"][0]
    assert first["id"] == jobs["keyed"][5] and first["key"] == "cust-1" and first["args"] == [5, 7_340_915]
    assert first["state"] == "pending" and first["task"] == "dashapp.add" and first["queue"] == "default"
    _, body = search(board, state="dead")
    assert "ValueError: x" in body and f'href="/jobs/{jobs["dead"][0]}?queue=default"' in body
    assert '<option value="dead" selected>' in body  # the form keeps what was asked
    _, body = search(board, match="<b>bold</b>")
    assert "<b>bold</b>" not in body and "&lt;b&gt;bold&lt;/b&gt;" in body


def test_pages_go_on_with_the_cursor(start_dashboard, jobs: dict[str, Any]) -> None:
    board = start_dashboard()
    expected = newest_first(jobs["keyed"])
    seen, cursor = [], None
    while True:
        params = {"task": "dashapp.add", "limit": "2", **({"cursor": cursor} if cursor else {})}
        status, document = api(board, **params)
        assert status == 200, document
        seen += [j["id"] for j in document["jobs"]]
        cursor = document["cursor"]
        if cursor is None:
            break
    assert seen == expected  # no gap, no repeat
    # The page: a Next link that keeps the filters and carries the cursor, until the last page.
    status, body = search(board, task="dashapp.add", limit="4")
    shown = rows(body)
    assert status == 200 and shown == expected[:4] and "more may follow" in body
    following = html.unescape(re.search(r'href="([^"]+)" rel="next"', body)[1])
    assert following.startswith("/search?") and "task=dashapp.add" in following and "cursor=" in following
    status, body, _ = http(board.base + following)
    assert status == 200 and rows(body) == expected[4:]
    assert 'rel="next"' not in body and 'rel="first"' in body


def test_bad_input_answers_400_with_the_reason(start_dashboard, jobs: dict[str, Any]) -> None:
    board = start_dashboard()
    _, document = api(board, task="dashapp.add", limit="2")
    other_cursor = document["cursor"]
    assert other_cursor
    cases = [
        ({"state": "bogus"}, "unknown state 'bogus'"),
        ({"queue": "nope"}, "unknown queue 'nope'"),
        ({"since": "1x"}, "since '1x': give a positive number and a unit"),
        ({"since": "0m"}, "since '0m'"),
        ({"state": "dead", "cursor": other_cursor}, "this cursor belongs to another query"),
        ({"task": "dashapp.add", "cursor": "garbage"}, "another query"),
        ({"limit": "0"}, "limit '0': use a whole number from 1 to 1000"),
        ({"limit": "ten"}, "limit 'ten'"),
    ]
    for params, message in cases:
        status, body = search(board, **params)
        assert status == 400, params
        assert message in html.unescape(re.search(r'id="error-message">([^<]*)<', body)[1]), (params, body)
        status, document = api(board, **params)
        assert status == 400 and message in document["error"], (params, document)
    # The page with a wrong filter keeps the form to correct it, and does not poll itself meanwhile.
    _, body = search(board, state="bogus", task="dashapp.add")
    assert 'id="search-form"' in body and 'value="dashapp.add"' in body and 'data-refresh="0"' in body
    # The bulk confirmation checks the same filters before counting anything.
    status, body, _ = http(f"{board.base}/search/retry?state=bogus")
    assert status == 400 and "unknown state" in body
    assert http(f"{board.base}/search/explode")[0] == 404


def csrf(board: Any, path: str) -> tuple[str, str, str]:
    """(body, cookie, token) of a page of the dashboard: what a browser posts its form with."""
    status, body, headers = http(board.base + path)
    assert status == 200, body
    cookie = re.search(r"taskforge_csrf=(\w+)", headers["set-cookie"])[1]
    token = re.search(r'name="csrf" value="(\w+)"', body)[1]
    return body, cookie, token


def post(board: Any, path: str, form: dict[str, str], cookie: str) -> tuple[int, str, Any]:
    headers = {"Cookie": f"taskforge_csrf={cookie}", "Origin": board.base}
    return http(board.base + path, urlencode(form).encode(), headers)


def test_a_bulk_action_shows_its_count_then_acts_on_confirmation(
    start_dashboard, producer: TaskForge, jobs: dict[str, Any]
) -> None:
    board = start_dashboard()
    # The search page links each action with its filters.
    _, body = search(board, state="dead")
    assert 'href="/search/retry?state=dead"' in body
    body, cookie, token = csrf(board, "/search/retry?state=dead")
    assert re.search(r"This will retry <strong>2</strong> jobs", body)
    assert '<input type="hidden" name="state" value="dead">' in body
    assert all(producer.job(i).status() is JobState.DEAD for i in jobs["dead"])  # asking changed nothing
    # Without the token, or without confirm=yes, nothing happens.
    assert post(board, "/search/retry", {"state": "dead", "confirm": "yes"}, cookie)[0] == 403
    status, body, _ = post(board, "/search/retry", {"state": "dead", "csrf": token}, cookie)
    assert status == 200 and "<strong>2</strong>" in body
    assert all(producer.job(i).status() is JobState.DEAD for i in jobs["dead"])
    status, _, headers = post(board, "/search/retry", {"state": "dead", "csrf": token, "confirm": "yes"}, cookie)
    assert status == 303 and headers["location"] == "/search?state=dead&done=retry&changed=2"
    assert all(producer.job(i).status() is JobState.PENDING for i in jobs["dead"])
    _, body = search(board, state="dead", done="retry", changed="2")
    assert 'id="bulk-outcome">Retried 2 jobs.</p>' in body and rows(body) == []
    # Cancel: only the keyed jobs of one customer; the filters shown; the rest left alone.
    body, cookie, token = csrf(board, "/search/cancel?task=dashapp.add&key=cust-0")
    assert "<strong>3</strong>" in body and "cust-0" in body and "pending, retrying, scheduled" in body
    form = {"task": "dashapp.add", "key": "cust-0", "csrf": token, "confirm": "yes"}
    status, _, headers = post(board, "/search/cancel", form, cookie)
    assert status == 303 and "changed=3" in headers["location"]
    states = [producer.job(i).status() for i in jobs["keyed"]]
    assert states == [JobState.CANCELLED, JobState.PENDING] * 3
    # Delete: nothing of the backlog is finished, so nothing to confirm.
    _, body = search(board, queue="backlog")
    assert 'href="/search/delete?queue=backlog"' in body
    _, body, _ = http(f"{board.base}/search/delete?queue=backlog")
    assert "No job to delete matches now." in body and "confirm-bulk" not in body
    status, _, headers = post(board, "/search/delete", {"queue": "backlog", "csrf": token, "confirm": "yes"}, cookie)
    assert status == 303 and "changed=0" in headers["location"]
    status, _, headers = post(board, "/search/delete", {"state": "cancelled", "csrf": token, "confirm": "yes"}, cookie)
    assert status == 303 and "changed=3" in headers["location"]
    assert producer.find_jobs(state="cancelled").jobs == []


def test_auth_covers_the_search_and_its_actions(start_dashboard, jobs: dict[str, Any]) -> None:
    board = start_dashboard("--auth", "admin:s3cret")
    for path in ("/search", "/api/jobs", "/search/retry?state=dead"):
        assert http(board.base + path)[0] == 401
    assert http(board.base + "/search/retry", b"state=dead&confirm=yes", {})[0] == 401
