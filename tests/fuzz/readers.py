"""Every reader of the shared keys, as one callable each, and what counts as surviving junk.

A reader is named ``<surface>:<what>``: ``lib:`` the library calls an
application or an operator's script makes, ``cli:`` the commands (in-process,
through click), ``web:`` the dashboard's pages and JSON API (in-process,
through its ASGI app), ``metrics:`` the Prometheus collector. Each returns
None when it survived, else why not in one line.

Surviving: the reader returns what it would show, with the junk left out.
A reader about one job or one workflow may instead say, as a
``TaskforgeError`` (CLI: exit 1 with one line; dashboard: an error page),
that this job or workflow is damaged or gone, naming its key or its id.
Never acceptable: any other exception, a traceback, an error that names
neither, or any error from a reader that is not about one job or workflow.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Callable

from click.testing import CliRunner

from taskforge import TaskforgeError
from taskforge.cli import main
from taskforge.dashboard.scaling import depth
from taskforge.metrics import QueueCollector
from taskforge.search import find_jobs, query
from taskforge.status import dead_jobs, status
from tests.asgi import asgi_get

from .junk import QUEUE, Scene

Reader = Callable[[Scene, str], str | None]
APP_MODULE = "junkapp_under_test"


def named(message: str, scene: Scene, key: str) -> bool:
    """Whether an error names the damaged key, or the job or workflow the reader asked about."""
    return any(name and name in message for name in (key, scene.succeeded, scene.workflow))


def library(call: Callable[[Scene], object], scoped: bool = False) -> Reader:
    """A library call: it returns, or (``scoped``: about one job or workflow) raises a TaskforgeError naming the key."""

    def read(scene: Scene, key: str) -> str | None:
        try:
            call(scene)
        except TaskforgeError as exc:
            if not scoped:
                return f"raised {type(exc).__name__}: {str(exc)[:300]}"
            return (
                None if named(str(exc), scene, key) else f"raised {type(exc).__name__} naming no key: {str(exc)[:300]}"
            )
        except Exception as exc:
            return f"raised {type(exc).__module__}.{type(exc).__name__}: {str(exc)[:300]}"
        return None

    return read


def _every_search(scene: Scene) -> None:
    app = scene.app
    for q in (query(app, queue=QUEUE), query(app, task="ok"), query(app, queue=QUEUE, match="answer"), query(app)):
        find_jobs(app, q, limit=50)


def _every_info(scene: Scene) -> None:
    for job_id in scene.jobs:
        try:
            scene.app.job(job_id).info()
        except TaskforgeError as exc:
            if "not found" not in str(exc).lower():
                raise


def _result(scene: Scene) -> None:
    scene.app.job(scene.succeeded).result(timeout=0.5)


def _workflows(scene: Scene) -> None:
    for workflow_id in (scene.workflow, scene.workflow_running):
        scene.app.workflow(workflow_id).info()


def _metrics(scene: Scene, key: str) -> str | None:
    try:
        families = {family.name: family for family in QueueCollector(scene.app, [QUEUE]).collect()}
    except Exception as exc:
        return f"the scrape raised {type(exc).__name__}: {str(exc)[:300]}"
    up = families["taskforge_broker_up"].samples[0].value
    return None if up == 1 else "the scrape said the broker is down (taskforge_broker_up 0)"


def cli(*args: str, scoped: bool = False) -> Reader:
    def read(scene: Scene, key: str) -> str | None:
        sys.modules[APP_MODULE] = types.SimpleNamespace(app=scene.app)  # type: ignore[assignment]
        filled = [a.format(s=scene) for a in args]
        result = CliRunner().invoke(main, [filled[0], f"{APP_MODULE}:app", *filled[1:]])
        said = (result.stderr or "") + (result.output or "")
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            exc = result.exception
            return f"crashed: {type(exc).__module__}.{type(exc).__name__}: {str(exc)[:300]}"
        if "Traceback" in said:
            return "printed a traceback"
        if result.exit_code == 0:
            return None
        if scoped and named(said, scene, key):
            return None
        return f"exit {result.exit_code}: {said.strip()[-300:]}"

    return read


def web(path: str, scoped: bool = False) -> Reader:
    def read(scene: Scene, key: str) -> str | None:
        filled = path.format(s=scene)
        try:
            code, body = asgi_get(scene.web, filled)
        except Exception as exc:
            return f"crashed: {type(exc).__module__}.{type(exc).__name__}: {str(exc)[:300]}"
        if code < 400:
            return None
        if scoped and b"Traceback" not in body and named(body.decode(errors="replace"), scene, key):
            return None
        return f"answered {code}: {body[:300]!r}"

    return read


READERS: dict[str, Reader] = {
    "lib:status": library(lambda scene: status(scene.app)),
    "lib:dead_jobs": library(lambda scene: dead_jobs(scene.app)),
    "lib:find_jobs": library(_every_search),
    "lib:depth": library(lambda scene: depth(scene.app, QUEUE)),
    "lib:info": library(_every_info, scoped=True),
    "lib:result": library(_result, scoped=True),
    "lib:workflow": library(_workflows, scoped=True),
    "metrics:collect": _metrics,
    "cli:status": cli("status"),
    "cli:jobs": cli("jobs", "--queue", QUEUE),
    "cli:job": cli("job", "{s.succeeded}", scoped=True),
    "cli:dead-list": cli("dead", "list"),
    "cli:workflow": cli("workflow", "{s.workflow}", scoped=True),
    "web:overview": web("/"),
    "web:workers": web("/workers"),
    "web:tasks": web("/tasks"),
    "web:dead": web("/dead"),
    "web:scheduled": web("/scheduled"),
    "web:queue": web(f"/queues/{QUEUE}"),
    "web:search": web(f"/search?queue={QUEUE}&match=answer"),
    "web:job": web("/jobs/{s.succeeded}", scoped=True),
    "web:workflows": web("/workflows"),
    "web:workflow": web("/workflows/{s.workflow}", scoped=True),
    "api:status": web("/api/status"),
    "api:history": web("/api/history"),
    "api:tasks": web("/api/tasks"),
    "api:dead": web("/api/dead"),
    "api:queue-jobs": web(f"/api/queues/{QUEUE}/jobs"),
    "api:depth": web(f"/api/queues/{QUEUE}/depth"),
    "api:jobs": web(f"/api/jobs?queue={QUEUE}"),
    "api:job": web("/api/jobs/{s.succeeded}", scoped=True),
    "api:workflows": web("/api/workflows"),
    "api:workflow": web("/api/workflows/{s.workflow}", scoped=True),
}
