"""The HTML pages and the actions their buttons post to.

Handlers are plain functions: Starlette runs them in its thread pool, so the
blocking Redis client never stalls the event loop. A page asked for with the
``X-Partial`` header renders only its ``<main>``: that is how the pages
refresh themselves (dashboard.js polls it) without a full reload.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any
from urllib.parse import quote, urlencode

import jinja2
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.templating import Jinja2Templates

from .. import status as tf_status
from ..depending import waits_for
from ..errors import JobNotFound
from ..handle import JobHandle
from ..job import JobState
from ..job_json import jsonable
from ..workflows.resume import retry_dead
from . import data, tasks, values
from .security import CSRF_FIELD, csrf_problem, csrf_token, read_form, set_csrf_cookie


def make_templates() -> Jinja2Templates:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("taskforge.dashboard", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters["utc"] = tf_status.as_utc  # the pages label times UTC: never print another zone's wall time
    env.filters["q"] = lambda value: quote(str(value), safe="")
    env.filters["tojson_args"] = lambda value: json.dumps(jsonable(value), indent=2, ensure_ascii=False)
    env.globals["STATES"] = data.STATES
    env.globals["PREVIEW_CHARS"] = values.PREVIEW_CHARS
    env.globals["server_warnings"] = []  # render() passes the live ones; a template rendered alone shows none
    env.filters["duration"] = tasks.duration
    return Jinja2Templates(env=env)


ACTIONS = ("retry", "cancel", "abort")


def static_dir() -> str:
    return str(resources.files("taskforge.dashboard").joinpath("static"))


def render(request: Request, name: str, status_code: int = 200, **context: Any) -> Response:
    context.update(
        csrf=csrf_token(request),
        csrf_field=CSRF_FIELD,
        partial=request.headers.get("x-partial") == "1",
        nav=name.removesuffix(".html"),
        broker=request.app.state.broker_url,
        server_warnings=data.server_warnings(request.app.state),
    )
    templates: Jinja2Templates = request.app.state.templates  # set by server.create_app
    response = templates.TemplateResponse(request, name, context, status_code=status_code)
    set_csrf_cookie(request, response)
    return response


def app_of(request: Request) -> Any:
    return request.app.state.taskforge


def overview(request: Request) -> Response:
    """The queues a page at a time (``OVERVIEW_QUEUES``): thousands of one-off queues cost the page
    what a hundred do, their charts included (issue 47: 5,000 queues took 8.1 s)."""
    app = app_of(request)
    names = tf_status.all_queues(app)
    page, pages, shown = data.queue_page(names, data.page_number(request.query_params.get("page")))
    status = tf_status.status(app, shown)
    history = data.history(app, shown)
    workflows = app.broker.ledger.workflow_counts()
    return render(
        request,
        "overview.html",
        status=status,
        history=history,
        workflows=workflows,
        page=page,
        pages=pages,
        queue_count=len(names),
    )


def task_times(request: Request) -> Response:
    """Per task, wait and run time percentiles over the last hour: a page of its own, as the overview is per queue."""
    app = app_of(request)
    return render(request, "tasks.html", times=tasks.task_times(app, tf_status.all_queues(app)))


def workers(request: Request) -> Response:
    return render(request, "workers.html", workers=tf_status.workers(app_of(request)), now=tf_status.now_utc())


def queue_jobs(request: Request) -> Response:
    page = data.job_page(
        app_of(request),
        request.path_params["queue"],
        request.query_params.get("state", "pending"),
        data.page_number(request.query_params.get("page")),
    )
    return render(request, "jobs.html", page=page)


def dead(request: Request) -> Response:
    app = app_of(request)
    queues = tf_status.all_queues(app)
    counts = {name: app.broker.inspection.counts(name)["dead"] for name in queues}
    return render(request, "dead.html", jobs=tf_status.dead_jobs(app, queues, data.PAGE_SIZE), counts=counts)


def scheduled(request: Request) -> Response:
    app = app_of(request)
    status = tf_status.status(app)
    soonest = {
        q.name: data.job_page(app, q.name, "scheduled", 1, 10) for q in status.queues if q.scheduled + q.retrying
    }
    return render(request, "scheduled.html", status=status, soonest=soonest)


def workflows(request: Request) -> Response:
    app = app_of(request)
    listing = data.workflow_list(app, data.workflow_limit(request.query_params.get("limit")))
    return render(request, "workflows.html", listing=listing, retention=app.retention)


def workflow(request: Request) -> Response:
    view = data.workflow_view(app_of(request), request.path_params["workflow_id"])
    return render(request, "workflow.html", view=view, info=view.info, held=view.held)


def handle_for(app: Any, job_id: str, queue: str | None) -> JobHandle[Any]:
    """A handle on the job; the queue, when the link carries it, saves looking it up."""
    return JobHandle(app, job_id, data.queue_name(queue) if queue else None)


def job(request: Request) -> Response:
    app = app_of(request)
    info = handle_for(app, request.path_params["job_id"], request.query_params.get("queue")).info()
    parents = waits_for(app, info.queue, info.id)  # depends_on: each job it waits for, and its state
    return render(request, "job.html", job=info, JobState=JobState, values=values.shown(info), parents=parents)


def download(request: Request) -> Response:
    """``GET /download/<field>/<id>[?queue=Q]``: one whole value of a job (cut on its page), as a file."""
    field, job_id = request.path_params["field"], request.path_params["job_id"]
    if field not in values.FIELDS:
        raise JobNotFound(f"no value {field!r} to download: use one of {', '.join(values.FIELDS)}")
    info = handle_for(app_of(request), job_id, request.query_params.get("queue")).info()
    data_field = field in values.DATA_FIELDS
    name = "".join(c if c.isalnum() or c in "-_." else "_" for c in job_id)[:100]
    disposition = f'attachment; filename="{field}-{name}.{"json" if data_field else "txt"}"'
    return Response(
        values.as_text(field, getattr(info, field)),
        media_type="application/json" if data_field else "text/plain; charset=utf-8",
        headers={"Content-Disposition": disposition},
    )


def apply_action(app: Any, job_id: str, queue: str | None, action: str) -> str | None:
    """Do it; a reason when it cannot be done."""
    handle = handle_for(app, job_id, queue)
    if action == "retry":
        state = handle.status()
        if state is not JobState.DEAD:
            return f"job {job_id} is {state.value}, not dead: only dead jobs can be retried"
        retry_dead(app.broker, handle.queue, [job_id])  # a dead workflow's step resumes its workflow
    elif action == "cancel":
        if not handle.cancel():
            return f"job {job_id} is {handle.status().value}: only pending, scheduled or retrying jobs can be cancelled"
    elif not handle.abort():
        return f"job {job_id} has already finished ({handle.status().value}): nothing to abort"
    return None


def safe_next(target: object, fallback: str) -> str:
    """Only a path on this site: an action never redirects the browser elsewhere."""
    text = str(target or "")
    return text if text.startswith("/") and not text.startswith("//") and "\\" not in text else fallback


async def act(request: Request) -> Response:
    """Retry, cancel or abort one job: a POST from the job's page or a list, with the CSRF token."""
    form = await read_form(request)
    problem = csrf_problem(request, form)
    if problem:
        return render(request, "error.html", status_code=403, message=problem)
    job_id, action = request.path_params["job_id"], request.path_params["action"]
    if action not in ACTIONS:
        return render(request, "error.html", status_code=404, message=f"no action {action!r}: use {', '.join(ACTIONS)}")
    queue = str(form.get("queue", "")) or None
    refused = await run_in_threadpool(apply_action, app_of(request), job_id, queue, action)
    if refused:
        return render(request, "error.html", status_code=409, message=refused)
    own_page = f"/jobs/{quote(job_id, safe='')}" + (f"?{urlencode({'queue': queue})}" if queue else "")
    return RedirectResponse(safe_next(form.get("next"), own_page), status_code=303)


async def retry_workflow(request: Request) -> Response:
    """Resume a dead workflow (``WorkflowHandle.retry()``): a POST from its page, with the CSRF token."""
    form = await read_form(request)
    problem = csrf_problem(request, form)
    if problem:
        return render(request, "error.html", status_code=403, message=problem)
    handle = app_of(request).workflow(request.path_params["workflow_id"])
    if not await run_in_threadpool(handle.retry):
        state = (await run_in_threadpool(handle.status)).value
        message = f"workflow {handle.id} is {state}, not dead: only a dead workflow can be retried"
        return render(request, "error.html", status_code=409, message=message)
    return RedirectResponse(f"/workflows/{quote(handle.id, safe='')}", status_code=303)


async def flow(request: Request) -> Response:
    """Pause or resume a queue (``app.pause`` / ``app.resume``): a POST from the overview, with the CSRF token."""
    form = await read_form(request)
    problem = csrf_problem(request, form)
    if problem:
        return render(request, "error.html", status_code=403, message=problem)
    queue = data.queue_name(request.path_params["queue"])
    flow = app_of(request).broker.flow
    change = flow.pause if request.url.path.endswith("/pause") else flow.resume
    await run_in_threadpool(change, queue)
    return RedirectResponse("/", status_code=303)


async def purge_dead(request: Request) -> Response:
    """GET asks for confirmation; POST (token and ``confirm=yes``) deletes the queue's dead jobs."""
    app = app_of(request)
    queue = data.queue_name(request.path_params["queue"])
    if request.method == "POST":
        form = await read_form(request)
        problem = csrf_problem(request, form)
        if problem:
            return render(request, "error.html", status_code=403, message=problem)
        if form.get("confirm") == "yes":
            deleted = await run_in_threadpool(app.broker.cleanup.purge, queue, "dead")
            return RedirectResponse(f"/dead?{urlencode({'purged': deleted, 'queue': queue})}", status_code=303)
    count = (await run_in_threadpool(app.broker.inspection.counts, queue))["dead"]
    return render(request, "confirm_purge.html", queue=queue, count=count)
