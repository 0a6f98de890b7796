"""The dashboard in Debian's Chromium, against a live worker running real jobs."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from taskforge import JobState, TaskForge

from ..worker.conftest import wait_for

pytestmark = [pytest.mark.redis, pytest.mark.slow]

TOKYO = timezone(timedelta(hours=9))  # no DST: the expected local time is plain arithmetic


def final(handle, timeout: float = 30) -> JobState:
    return wait_for(
        lambda: handle.status() if handle.status().finished else None, timeout, f"job {handle.id} to finish"
    )  # type: ignore[return-value]


def job_url(base: str, handle) -> str:
    return f"{base}/jobs/{handle.id}?queue={handle.queue}"


def test_every_page_and_action_in_a_real_browser(
    chromium, start_dashboard, worker, producer: TaskForge, screenshots: Path
) -> None:
    @producer.task(name="dashapp.add")
    def add(a, b): ...

    @producer.task(name="dashapp.later", queue="backlog")
    def later(n): ...

    added = [add.delay(i, 1) for i in range(8)]
    doomed = producer.send("dashapp.fails_first", "phoenix")
    slow = producer.send("dashapp.slow", 120)
    due = add.apply_in(3600, 40, 2)
    later.delay_many([(i,) for i in range(60)])
    assert [h.result(timeout=30) for h in added] == [i + 1 for i in range(8)]
    assert final(doomed) is JobState.DEAD
    wait_for(lambda: slow.status() is JobState.RUNNING, 30, "the slow job to start")
    wait_for(lambda: succeeded_counted(producer) == 8, 10, "the worker to write its success counts (each second)")
    board = start_dashboard()
    context = chromium.new_context(timezone_id="Asia/Tokyo", viewport={"width": 1280, "height": 720})
    page = context.new_page()
    page.set_default_timeout(30_000)

    # Overview: per-queue counts, the last hour, times in the viewer's zone.
    page.goto(board.base + "/")
    row = page.locator('tr[data-queue="default"]')
    assert row.locator(".succeeded-hour").inner_text() == "8"
    assert row.locator("td").nth(6).inner_text() == "1"  # dead
    assert row.locator("td").nth(4).inner_text() == "1"  # running
    assert row.locator("svg.chart rect.ok").count() >= 1 and row.locator("svg.chart rect.fail").count() >= 1
    assert page.locator('tr[data-queue="backlog"] td').nth(1).inner_text() == "60"
    stamp = page.locator("time:not(.since)").first
    shown = datetime.fromisoformat(stamp.get_attribute("datetime")).astimezone(TOKYO)
    assert stamp.inner_text() == shown.strftime("%Y-%m-%d %H:%M:%S")
    page.screenshot(path=str(screenshots / "overview.png"), full_page=True)
    later.delay(60)  # the page shows it without a reload: it refreshes itself
    page.wait_for_function("document.querySelector('tr[data-queue=\"backlog\"] td:nth-child(2)').innerText === '61'")

    # Workers: host, pid, the running job and for how long, the heartbeat.
    page.goto(board.base + "/workers")
    page.wait_for_selector(f"text={slow.id}")
    assert page.locator(".worker dd").nth(1).inner_text() == str(worker.pid)
    assert page.locator(".elapsed").first.inner_text().endswith(("s", "min"))
    page.screenshot(path=str(screenshots / "workers.png"), full_page=True)

    # A running job: progress shown; abort it.
    page.goto(job_url(board.base, slow))
    assert "halfway" in page.locator("dl.facts").inner_text()
    page.screenshot(path=str(screenshots / "job-running.png"), full_page=True)
    page.click("button[data-action=abort]")
    page.wait_for_selector(".state-cancelled")
    assert slow.status() is JobState.CANCELLED

    # The dead job: error and traceback; retry it and watch it succeed (the page refreshes itself).
    page.goto(job_url(board.base, doomed))
    forged = """(id) => fetch('/jobs/' + id + '/retry', {method: 'POST', body: new URLSearchParams({queue: 'default'})})
                      .then(r => r.status)"""
    assert page.evaluate(forged, doomed.id) == 403  # same site, cookie sent, but no token in the form
    assert doomed.status() is JobState.DEAD
    assert "first run of phoenix fails on purpose" in page.locator("#error").inner_text()
    assert "ValueError" in page.locator(".traceback").inner_text()
    page.click("button[data-action=retry]")
    page.wait_for_selector(".state-succeeded")
    assert '"phoenix recovered"' in page.locator("#result").inner_text()
    assert doomed.result(timeout=10) == "phoenix recovered"
    page.screenshot(path=str(screenshots / "job.png"), full_page=True)

    # Scheduled and periodic.
    page.goto(board.base + "/scheduled")
    assert "dashapp.hourly_report" in page.locator("#periodic").inner_text()
    assert page.locator(f'tr[data-job="{due.id}"]').count() == 1
    page.screenshot(path=str(screenshots / "scheduled.png"), full_page=True)
    page.locator(f'tr[data-job="{due.id}"] button[data-action=cancel]').click()
    wait_for(lambda: due.status() is JobState.CANCELLED, 30, "the scheduled job to be cancelled")

    # A long queue, 50 a page.
    page.goto(board.base + "/queues/backlog?state=pending")
    assert page.locator("#jobs tbody tr").count() == 50
    page.click("a[rel=next]")
    page.wait_for_url("**page=2")
    assert page.locator("#jobs tbody tr").count() == 11

    # Dead letters: purge asks first, then deletes.
    ash = producer.send("dashapp.fails_first", "ash")
    assert final(ash) is JobState.DEAD
    page.goto(board.base + "/dead")
    assert page.locator(f'tr[data-job="{ash.id}"]').count() == 1
    page.screenshot(path=str(screenshots / "dead.png"), full_page=True)
    page.click("a.btn-purge")
    assert "deletes 1 dead job for good" in page.locator("main").inner_text()
    assert ash.status() is JobState.DEAD  # asking deleted nothing
    page.click("#confirm-purge")
    page.wait_for_selector("text=Deleted 1 dead job")
    assert producer.broker.inspection.counts("default")["dead"] == 0
    context.close()


def test_auth_guards_the_browser_too(chromium, start_dashboard, redis_url: str) -> None:
    from playwright.sync_api import Error as PlaywrightError

    board = start_dashboard("--auth", "admin:s3cret")
    for credentials in (None, {"username": "admin", "password": "nope"}):
        refused = chromium.new_context(http_credentials=credentials)
        try:
            assert refused.new_page().goto(board.base + "/").status == 401
        except PlaywrightError as exc:  # headless Chromium may end the navigation instead of showing the 401
            assert "ERR_INVALID_AUTH_CREDENTIALS" in str(exc)
        for path in ("/", "/workers", "/api/status", "/static/dashboard.css"):
            assert refused.request.get(board.base + path).status == 401
        assert refused.request.post(board.base + "/jobs/x/retry", form={"queue": "default"}).status == 401
        refused.close()
    allowed = chromium.new_context(http_credentials={"username": "admin", "password": "s3cret"})
    page = allowed.new_page()
    assert page.goto(board.base + "/").status == 200
    assert page.locator("h1").first.inner_text() == "Queues"
    assert page.evaluate("getComputedStyle(document.querySelector('header')).display") == "flex"  # CSS loaded
    allowed.close()


def succeeded_counted(app: TaskForge) -> int:
    """Successes the worker has written to the per-minute counters so far."""
    client = app.broker.client
    return sum(int(client.hget(key, "succeeded") or 0) for key in client.scan_iter(match="taskforge:{default}:stats:*"))
