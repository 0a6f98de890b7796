"""Pages that stay small and cheap whatever the jobs hold: big values cut to a preview with a download,
every job id reachable (a '/' in it too), and a bulk confirmation that counts only so far."""

from __future__ import annotations

import json
import re
from urllib.parse import quote, urlencode

import pytest

from taskforge import JobState, TaskForge, chain

from .conftest import http

pytestmark = [pytest.mark.redis, pytest.mark.slow]

BIG = 1_000_000  # characters of one argument: a page would be as big


def test_a_big_argument_is_a_preview_with_a_download(start_dashboard, producer: TaskForge) -> None:
    value = "x" * BIG
    handle = producer.task_for("dashapp.add").delay(value, {"deep": ["y" * 100_000]})
    small = producer.task_for("dashapp.add").delay(1, 2)
    board = start_dashboard()
    status, body, _ = http(f"{board.base}/jobs/{handle.id}?queue=default")
    assert status == 200 and len(body) < 300_000, len(body)
    assert 'data-refresh="0"' in body  # a cut page is not read again every 3 s
    assert 'id="args-cut"' in body and "Download the whole value" in body
    link = re.search(r'href="(/download/args/[^"]+)"', body)[1].replace("&amp;", "&")
    status, whole, headers = http(board.base + link)
    assert status == 200 and json.loads(whole) == [value, {"deep": ["y" * 100_000]}]
    assert headers["content-disposition"].startswith('attachment; filename="args-')
    status, doc, _ = http(f"{board.base}/api/jobs/{handle.id}")
    args = json.loads(doc)["args"]
    assert status == 200 and len(doc) < 300_000
    assert args["cut"] is True and args["chars"] > BIG and args["download"] == link
    assert args["preview"].startswith('[\n  "xxxx')
    for listing in ("/api/queues/default/jobs?state=pending", "/api/jobs?queue=default"):
        page = json.loads(http(board.base + listing)[1])
        cut = {job["id"]: isinstance(job["args"], dict) for job in page["jobs"]}
        assert cut == {handle.id: True, small.id: False}, listing
    status, body, _ = http(f"{board.base}/jobs/{small.id}")  # a small job is shown whole, and refreshes
    assert status == 200 and 'data-refresh="3"' in body and "Download the whole value" not in body
    assert json.loads(http(f"{board.base}/api/jobs/{small.id}")[1])["args"] == [1, 2]
    assert http(f"{board.base}/download/secrets/{handle.id}")[0] == 404


def test_a_job_id_with_slashes_is_reachable_from_its_links(start_dashboard, producer: TaskForge) -> None:
    chosen = "orders/2026/42"
    handle = producer.task_for("dashapp.add").with_options(job_id=chosen).delay(1, 2)
    assert handle.id == chosen
    board = start_dashboard()
    listing = http(f"{board.base}/queues/default?state=pending")[1]
    link = re.search(r'href="(/jobs/orders[^"]*)"', listing)[1].replace("&amp;", "&")
    assert link == f"/jobs/{quote(chosen, safe='')}?queue=default"
    status, body, headers = http(board.base + link)
    assert status == 200 and f'Job <span class="mono">{chosen}</span>' in body
    status, doc, _ = http(f"{board.base}/api/jobs/{quote(chosen, safe='')}")
    assert status == 200 and json.loads(doc)["id"] == chosen
    cookie = re.search(r"taskforge_csrf=(\w+)", headers["set-cookie"])[1]
    action = re.search(r'action="(/jobs/[^"]+/cancel)"', body)[1]
    status, _, redirect = http(
        board.base + action,
        urlencode({"csrf": cookie, "queue": "default"}).encode(),
        {"Cookie": f"taskforge_csrf={cookie}"},
    )
    assert status == 303 and producer.job(chosen).status() is JobState.CANCELLED
    assert http(board.base + redirect["location"])[0] == 200


def test_a_bulk_confirmation_counts_only_so_far(start_dashboard, producer: TaskForge) -> None:
    add = producer.task_for("dashapp.add")
    for start in range(0, 10_050, 2_000):
        add.delay_many([(n, n) for n in range(start, min(start + 2_000, 10_050))])
    board = start_dashboard()
    status, body, _ = http(f"{board.base}/search/cancel?{urlencode({'queue': 'default'})}")
    assert status == 200, body[:300]
    count = re.search(r'id="bulk-count">(.*?)</p>', body, re.S)[1]
    assert "more than 10,000" in count and "10050" not in body and "10,050" not in body
    assert "Cancel more than 10,000 jobs" in body
    status, body, _ = http(f"{board.base}/search/cancel?{urlencode({'queue': 'default', 'key': 'none'})}")
    assert status == 200 and "No job to cancel matches now." in body


def test_a_workflows_big_error_is_cut_with_a_link_to_its_step(start_dashboard, producer: TaskForge) -> None:
    @producer.task(name="dashapp.fails_first", max_attempts=1)
    def explode(value: str) -> None:
        raise RuntimeError("e" * BIG)

    flow = chain(explode.si("x"), explode.si("y")).delay()
    producer.drain()
    board = start_dashboard()
    status, body, _ = http(f"{board.base}/workflows/{flow.id}")
    assert status == 200 and len(body) < 300_000, len(body)
    assert 'id="error-cut"' in body and f'href="/jobs/{flow.id}.0"' in body
    status, doc, _ = http(f"{board.base}/api/workflows/{flow.id}")
    steps = json.loads(doc)["steps"]
    assert status == 200 and len(doc) < 300_000 and steps[0]["error"]["cut"] is True
    link = json.loads(doc)["error"]["download"]
    assert link == f"/download/error/{flow.id}.0"
    assert http(board.base + link)[1] == "RuntimeError: " + "e" * BIG
