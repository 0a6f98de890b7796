"""Search, a bulk retry through its confirmation, pause and resume, in Chromium against a live worker."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest

from taskforge import JobState, TaskForge

from .test_browser import final

pytestmark = [pytest.mark.redis, pytest.mark.slow]


def asked(url: str) -> dict[str, str]:
    """The fields a search URL carries (the empty ones a form sends left out)."""
    return dict(parse_qsl(urlsplit(url).query))


def shown(page: Any) -> list[str]:
    """The ids in the results table, in order, read at once (the page may refresh itself meanwhile)."""
    return page.locator("#results").evaluate("t => [...t.querySelectorAll('tr[data-job]')].map(r => r.dataset.job)")


def search(page: Any, base: str, **fields: str) -> list[str]:
    """Fill in the search form as a person would and send it: the ids it shows."""
    page.goto(base + "/search")
    form = page.locator("#search-form")
    for name, value in fields.items():
        control = form.locator(f"[name={name}]")
        if name in ("queue", "state"):
            control.select_option(value)
        else:
            control.fill(value)
    form.locator("#search-button").click()
    page.wait_for_url(lambda url: asked(url) == fields)
    return shown(page)


def ids_of(handles: list[Any]) -> set[str]:
    return {h.id for h in handles}


def test_search_bulk_retry_and_pause_in_a_real_browser(
    chromium, start_dashboard, worker, producer: TaskForge, screenshots: Path
) -> None:
    add = producer.task_for("dashapp.add")
    fails = producer.task_for("dashapp.fails_first")
    summed = [add.with_options(key=f"cust-{n % 2}").delay(n, 7_340_920 + n) for n in range(7)]
    doomed = [fails.with_options(key="cust-9").delay(f"bulk-{n}") for n in range(3)]
    assert [h.result(timeout=30) for h in summed] == [n + 7_340_920 + n for n in range(7)]
    assert all(final(h) is JobState.DEAD for h in doomed)
    board = start_dashboard()
    context = chromium.new_context(viewport={"width": 1280, "height": 720})
    page = context.new_page()
    page.set_default_timeout(30_000)

    # By task and state: the dead ones, with their errors and the bulk actions.
    assert set(search(page, board.base, task="dashapp.fails_first", state="dead")) == ids_of(doomed)
    assert "first run of bulk-0 fails on purpose" in page.locator("#results").inner_text()
    assert page.locator("#search-form [name=task]").input_value() == "dashapp.fails_first"  # kept in the form
    page.screenshot(path=str(screenshots / "search.png"), full_page=True)
    # By key, by text (an argument's digits), by queue and state.
    assert set(search(page, board.base, key="cust-1")) == {h.id for h in summed[1::2]}
    assert search(page, board.base, match="7340923") == [summed[3].id]
    assert len(search(page, board.base, queue="default", state="succeeded")) == 7
    # A wrong filter: the reason, on the page, with the form to correct it.
    page.goto(board.base + "/search?since=yesterday")
    assert "since 'yesterday'" in page.locator("#error-message").inner_text()

    # Pages of three, Next after Next, in the library's order: no gap, no repeat.
    seen = search(page, board.base, task="dashapp.add", limit="3")
    assert len(seen) == 3 and "more may follow" in page.locator("main").inner_text()
    while page.locator("#next-page").count():
        before = page.url
        page.click("#next-page")
        page.wait_for_url(lambda url, before=before: url != before)
        seen += shown(page)
    assert seen == [job.id for job in producer.find_jobs(task="dashapp.add").jobs] and len(seen) == 7

    # A bulk retry asks first, with the count, then retries; the jobs run again and succeed.
    search(page, board.base, task="dashapp.fails_first", state="dead")
    page.click("#bulk-retry")
    page.wait_for_url("**/search/retry?**")
    assert "This will retry 3 jobs" in page.locator("#bulk-count").inner_text()
    assert "dashapp.fails_first" in page.locator("#bulk-filters").inner_text()
    page.screenshot(path=str(screenshots / "confirm_bulk.png"), full_page=True)
    assert all(h.status() is JobState.DEAD for h in doomed)  # asking changed nothing
    page.click("#confirm-bulk")
    page.wait_for_url("**done=retry**")
    assert page.locator("#bulk-outcome").inner_text() == "Retried 3 jobs."
    assert [h.result(timeout=30) for h in doomed] == [f"bulk-{n} recovered" for n in range(3)]
    page.goto(board.base + "/search?key=cust-9")  # the page follows them until they have all succeeded
    page.wait_for_function("document.querySelectorAll('#results .state-succeeded').length === 3")

    # Pause the queue from the overview: a job sent meanwhile waits; resume, and it runs.
    page.goto(board.base + "/")
    page.wait_for_selector('tr[data-queue="default"] svg.chart rect.ok')  # the server-drawn chart of the hour
    page.click('tr[data-queue="default"] button[data-action=pause]')
    page.wait_for_selector('tr[data-queue="default"] .paused')
    held = add.delay(20, 22)
    page.wait_for_function(  # the overview shows it without a reload
        "document.querySelector('tr[data-queue=\"default\"] td:nth-child(2)').innerText === '1'"
    )
    page.wait_for_timeout(2_000)  # a worker that could take it would have by now: it starts at once when idle
    assert held.status() is JobState.PENDING
    page.screenshot(path=str(screenshots / "paused.png"), full_page=True)
    page.click('tr[data-queue="default"] button[data-action=resume]')
    page.wait_for_selector('tr[data-queue="default"] .paused', state="detached")
    assert held.result(timeout=30) == 42
    context.close()
