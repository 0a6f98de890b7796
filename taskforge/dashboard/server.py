"""Routes, error pages and the middleware stack of the dashboard."""

from __future__ import annotations

import socket
from collections.abc import Iterable
from typing import TYPE_CHECKING

import redis
import uvicorn
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from ..broker.connection import redact
from ..errors import BrokerUnavailable, ConfigurationError, DashboardPortUnavailable, JobNotFound, TaskforgeError
from . import api, finding, pages
from .hosts import HostCheck, allowed_hosts
from .security import BasicAuth

if TYPE_CHECKING:
    from ..app import TaskForge


def error_status(exc: Exception) -> int:
    if isinstance(exc, JobNotFound):
        return 404
    if isinstance(exc, ConfigurationError):
        return 400
    if isinstance(exc, BrokerUnavailable):
        return 503
    return 500


def on_error(request: Request, exc: Exception) -> Response:
    """Library errors become a page (or JSON under /api/) saying what happened; never a traceback."""
    message = str(exc) if isinstance(exc, TaskforgeError) else f"Redis answered with an error: {redact(str(exc))}"
    code = error_status(exc)
    if request.url.path.startswith("/api/"):
        return JSONResponse({"error": message}, status_code=code)
    return pages.render(request, "error.html", status_code=code, message=message)


def create_app(
    app: TaskForge,
    auth: tuple[str, str] | None = None,
    allow_hosts: Iterable[str] = (),
    bound_to: str | None = None,
) -> Starlette:
    """The dashboard of ``app`` as an ASGI application; with ``auth``, every request needs it.

    It answers only to a ``Host`` of the loopback names and addresses, of
    ``bound_to`` (the address it listens on, unless that is every address)
    and of ``allow_hosts`` (names, any port; pages of these names may also
    act, as behind a proxy): see ``hosts``. A malformed name is a
    ``ConfigurationError``.
    """
    routes = [
        Route("/", pages.overview),
        Route("/workers", pages.workers),
        Route("/tasks", pages.task_times),
        Route("/dead", pages.dead),
        Route("/scheduled", pages.scheduled),
        Route("/search", finding.search),
        Route("/search/{action}", finding.bulk_action, methods=["GET", "POST"]),
        # Queue names may contain '/': the purge route goes first, as the list's would swallow it.
        Route("/queues/{queue:path}/purge-dead", pages.purge_dead, methods=["GET", "POST"]),
        Route("/queues/{queue:path}/pause", pages.flow, methods=["POST"]),
        Route("/queues/{queue:path}/resume", pages.flow, methods=["POST"]),
        Route("/queues/{queue:path}", pages.queue_jobs),
        # Job ids may contain '/' too: the action (a POST) is the last segment, the page (a GET) all the rest.
        Route("/jobs/{job_id:path}/{action:str}", pages.act, methods=["POST"]),
        Route("/jobs/{job_id:path}", pages.job),
        Route("/download/{field:str}/{job_id:path}", pages.download),
        Route("/workflows", pages.workflows),
        Route("/workflows/{workflow_id}", pages.workflow),
        Route("/workflows/{workflow_id}/retry", pages.retry_workflow, methods=["POST"]),
        Route("/api/status", api.status),
        Route("/api/history", api.history),
        Route("/api/tasks", api.task_times),
        Route("/api/dead", api.dead),
        Route("/api/queues/{queue:path}/jobs", api.queue_jobs),
        Route("/api/queues/{queue:path}/depth", api.depth),
        Route("/api/jobs", finding.api_jobs),
        Route("/api/jobs/{job_id:path}", api.job),
        Route("/api/workflows", api.workflows),
        Route("/api/workflows/{workflow_id}", api.workflow),
        Mount("/static", StaticFiles(directory=pages.static_dir()), name="static"),
    ]
    middleware = [Middleware(HostCheck, allowed=allowed_hosts(allow_hosts, bound_to))]
    if auth:
        middleware.append(Middleware(BasicAuth, user=auth[0], password=auth[1]))
    handlers = {TaskforgeError: on_error, redis.RedisError: on_error}
    web = Starlette(routes=routes, middleware=middleware, exception_handlers=handlers)
    web.state.taskforge = app
    web.state.templates = pages.make_templates()
    web.state.broker_url = redact(app.url)
    return web


def bind(host: str, port: int) -> socket.socket:
    """The listening socket, bound here so a taken port is our clear error, not uvicorn's exit code."""
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError as exc:
        raise DashboardPortUnavailable(
            f"cannot serve the dashboard on {host}:{port}: {exc.strerror or exc}; choose another --port or --host"
        ) from exc
    return sock


def serve(web: Starlette, sock: socket.socket) -> None:
    """Run until SIGINT or SIGTERM (uvicorn handles both and shuts down gracefully)."""
    host, port = sock.getsockname()[:2]
    config = uvicorn.Config(web, host=host, port=port, log_level="warning", access_log=False)
    uvicorn.Server(config).run(sockets=[sock])
