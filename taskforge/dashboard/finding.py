"""The search page, its bulk actions and ``GET /api/jobs``: ``taskforge.search`` and ``taskforge.bulk`` over HTTP.

The filters travel in the URL (the form is a GET), so a search is a link
that can be kept, shared and refreshed live like every other page, and its
"Next" link is the same URL with the cursor the page ended at. A bulk action
takes two steps, as purging dead jobs does: a GET that changes nothing and
shows how many jobs the action would change now (counting stops past
``COUNT_CAP``: "more than 10,000", so a GET does bounded work), under which filters; then a
POST (the CSRF token, ``confirm=yes``) carrying those filters in hidden
fields. The POST applies to every job that matches when it arrives, not to
the number shown (jobs come and go in between), so the message after it says
how many it changed. Bad input (an unknown state or queue, a malformed
``since``, a cursor of another query) answers 400 with the library's own
message: on the page above the form, to correct it there; ``{"error": ...}``
from the API.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response

from .. import bulk
from ..handle import known_queues
from ..job import JobState
from ..search import MAX_LIMIT, JobPage, Query, find_jobs, query
from ..since import parse_since
from . import values
from .data import PAGE_SIZE
from .pages import app_of, render
from .security import csrf_problem, read_form

FILTERS = ("queue", "state", "task", "key", "match", "since")
SINCE_CHOICES = ("15m", "1h", "6h", "1d", "7d")  # offered in the form; any 30s, 15m, 1h or 2d is taken
BULK_LABELS = {"retry": "Retry", "cancel": "Cancel", "delete": "Delete"}
COUNT_CAP = 10_000  # a confirmation (a GET) counts this far, then says "more than"


@dataclass(frozen=True)
class Search:
    """A search as asked: the fields given (echoed in the form, links and hidden fields) and their checked query."""

    given: dict[str, str]
    query: Query
    limit: int
    cursor: str | None

    def url(self, path: str = "/search", **extra: str) -> str:
        """``path`` with this search's fields, and ``extra`` ones (a cursor, a bulk action's outcome)."""
        params = {**self.given, **extra}
        return path + ("?" + urlencode(params) if params else "")


def given_fields(params: Mapping[str, str]) -> dict[str, str]:
    """The filters and limit a form or URL gives; an empty field is one not given (HTML forms send them all)."""
    return {name: params[name] for name in (*FILTERS, "limit") if params.get(name)}


def read_search(app: Any, params: Mapping[str, str]) -> Search:
    """Check a search's fields; a ``ValueError`` saying which one is wrong and why."""
    given = given_fields(params)
    raw_limit = given.get("limit", str(PAGE_SIZE))
    if not raw_limit.isdigit() or not 1 <= int(raw_limit) <= MAX_LIMIT:
        raise ValueError(f"limit {raw_limit!r}: use a whole number from 1 to {MAX_LIMIT}")
    since = parse_since(given["since"]) if "since" in given else None
    filters = query(
        app,
        queue=given.get("queue"),
        state=given.get("state"),
        task=given.get("task"),
        key=given.get("key"),
        match=given.get("match"),
        since=since,
    )
    return Search(given, filters, int(raw_limit), params.get("cursor") or None)


def outcome(params: Mapping[str, str]) -> str | None:
    """The line a bulk action's redirect asks the search page to show ("Retried 12 jobs.")."""
    action, changed = params.get("done", ""), params.get("changed", "")
    if action not in bulk.DONE or not changed.isdigit():
        return None
    return f"{bulk.DONE[action].capitalize()} {changed} job{'' if changed == '1' else 's'}."


def form_context(app: Any) -> dict[str, Any]:
    return {"queues": known_queues(app), "states": [s.value for s in JobState], "since_choices": SINCE_CHOICES}


def search(request: Request) -> Response:
    """``GET /search``: the form, and one page of what matches (every job, newest first, when nothing is given)."""
    app = app_of(request)
    params = request.query_params
    context = {**form_context(app), "form": given_fields(params), "outcome": outcome(params), "labels": BULK_LABELS}
    try:
        asked = read_search(app, params)
        page = find_jobs(app, asked.query, asked.limit, asked.cursor)
    except ValueError as exc:
        return render(request, "search.html", status_code=400, error=str(exc), page=None, links={}, **context)
    return render(request, "search.html", error=None, page=page, links=links(asked, page), **context)


def links(asked: Search, page: JobPage) -> dict[str, Any]:
    """Where the page's links go: the next page and the first (each keeping the fields), and each bulk action."""
    return {
        "next": asked.url(cursor=page.cursor) if page.cursor else None,
        "first": asked.url() if asked.cursor else None,
        "bulk": {action: asked.url(f"/search/{action}") for action in BULK_LABELS},
    }


async def bulk_action(request: Request) -> Response:
    """GET: how many jobs ``action`` would change, and a form to confirm; POST (token, ``confirm=yes``): do it."""
    action = request.path_params["action"]
    if action not in BULK_LABELS:
        message = f"no bulk action {action!r}: use {', '.join(BULK_LABELS)}"
        return render(request, "error.html", status_code=404, message=message)
    app = app_of(request)
    params: Mapping[str, str] = request.query_params
    if request.method == "POST":
        form = await read_form(request)
        problem = csrf_problem(request, form)
        if problem:
            return render(request, "error.html", status_code=403, message=problem)
        params = form
    try:
        asked = await run_in_threadpool(read_search, app, params)
    except ValueError as exc:
        return render(request, "error.html", status_code=400, message=str(exc))
    if request.method == "POST" and params.get("confirm") == "yes":
        changed = await run_in_threadpool(bulk.apply, app, asked.query, action)
        return RedirectResponse(asked.url(done=action, changed=str(changed)), status_code=303)
    count = await run_in_threadpool(bulk.count, app, asked.query, action, COUNT_CAP)
    applies_to = sorted(s.value for s in bulk.ACTIONS[action])
    return render(
        request,
        "confirm_bulk.html",
        action=action,
        label=BULK_LABELS[action],
        count=count,
        cap=COUNT_CAP,
        given=asked.given,
        filters={name: value for name, value in asked.given.items() if name != "limit"},
        applies_to=applies_to,
        back=asked.url(),
    )


def api_jobs(request: Request) -> JSONResponse:
    """``GET /api/jobs``: one page as ``taskforge jobs --json`` prints it; 400 and ``{"error": ...}`` for bad input."""
    app = app_of(request)
    try:
        asked = read_search(app, request.query_params)
        page = find_jobs(app, asked.query, asked.limit, asked.cursor)
    except ValueError as exc:
        return JSONResponse({"error": str(exc)}, status_code=400)
    return JSONResponse(values.cut_each(page.to_dict(), "jobs"))
