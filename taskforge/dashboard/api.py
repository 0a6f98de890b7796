"""The JSON API behind the pages: the documents ``taskforge status``, ``job`` and ``workflow --json`` print.

    GET /api/status                             the ``status --json`` document (schema_version 1)
    GET /api/history                            runs succeeded and failed per minute, last hour, per queue
    GET /api/tasks                              per queue and task, wait and run time p50 and p95 (seconds),
                                                over the last hour and per minute
    GET /api/queues/{queue}/jobs?state=S&page=N one page (50) of a queue's jobs: pending, scheduled,
                                                running or dead; each job as ``job --json`` prints it
    GET /api/queues/{queue}/depth               the queue's depth for an autoscaler (KEDA's metrics-api
                                                scaler): {"depth": jobs to start now + running, ...}
    GET /api/dead?limit=N                       the N (default 50, at most 500) newest dead jobs, all queues
    GET /api/jobs?queue=&state=&task=&key=&match=&since=&limit=&cursor=
                                                one page of a search, as ``taskforge jobs --json`` prints it
    GET /api/jobs/{id}[?queue=Q]                one job, as ``taskforge job --json`` prints it
    GET /download/{field}/{id}[?queue=Q]        one whole value (args, kwargs, result, error, traceback)

Every job document here has each value longer than 64 KiB of text cut
(``values.cut_json``): ``{"cut": true, "preview", "chars", "download"}``.
    GET /api/workflows?limit=N                  counts of workflows by state, and the N (default 20,
                                                at most 500) newest of each state, without their steps
    GET /api/workflows/{id}                     one workflow, as ``taskforge workflow --json`` prints it

Errors answer ``{"error": "<what went wrong and what to do>"}`` with status
400 (bad parameter), 404 (no such job or workflow), 503 (Redis unreachable).
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse

from .. import status as tf_status
from ..errors import ConfigurationError
from ..job_json import job_to_json
from . import data, scaling, tasks, values
from .pages import app_of, handle_for

MAX_DEAD = 500


def status(request: Request) -> JSONResponse:
    """What ``taskforge status --json`` prints: the queues, the workflows and the server's settings."""
    app = app_of(request)
    # The queues first: with Redis gone, that read raises the BrokerUnavailable naming the (redacted) URL.
    document = {**tf_status.status(app).to_dict(), "workflows": app.broker.ledger.workflow_counts()}
    summary, warnings = tf_status.server_report(app)
    return JSONResponse({**document, "server": {"summary": summary, "warnings": warnings}})


def history(request: Request) -> JSONResponse:
    app = app_of(request)
    return JSONResponse(data.history(app, tf_status.all_queues(app)).to_dict())


def task_times(request: Request) -> JSONResponse:
    app = app_of(request)
    return JSONResponse(tasks.task_times(app, tf_status.all_queues(app)).to_dict())


def queue_jobs(request: Request) -> JSONResponse:
    page = data.job_page(
        app_of(request),
        request.path_params["queue"],
        request.query_params.get("state", "pending"),
        data.page_number(request.query_params.get("page")),
    )
    return JSONResponse(values.cut_each(page.to_dict(), "jobs"))


def depth(request: Request) -> JSONResponse:
    return JSONResponse(scaling.depth(app_of(request), request.path_params["queue"]).to_dict())


def dead(request: Request) -> JSONResponse:
    raw = request.query_params.get("limit", "50")
    if not raw.isdigit() or not 1 <= int(raw) <= MAX_DEAD:
        raise ConfigurationError(f"limit {raw!r}: use a whole number from 1 to {MAX_DEAD}")
    jobs = tf_status.dead_jobs(app_of(request), None, int(raw))
    return JSONResponse([values.cut_json(job_to_json(info)) for info in jobs])


def job(request: Request) -> JSONResponse:
    handle = handle_for(app_of(request), request.path_params["job_id"], request.query_params.get("queue"))
    return JSONResponse(values.cut_json(job_to_json(handle.info())))


def workflows(request: Request) -> JSONResponse:
    listing = data.workflow_list(app_of(request), data.workflow_limit(request.query_params.get("limit")))
    return JSONResponse(listing.to_dict())


def workflow(request: Request) -> JSONResponse:
    doc = data.workflow_view(app_of(request), request.path_params["workflow_id"]).to_dict()
    return JSONResponse(values.cut_workflow(doc))
