"""Event hooks and middleware: user code around every job a worker runs.

A hook or middleware that raises is logged and never loses the job: hooks
are called after the queue has recorded the outcome, and a middleware's own
exception is treated as the task's failure (it wrapped the task, after all).

Middleware of ``async def`` tasks. ``call_next()`` runs the rest of the
chain; for an async task it returns an awaitable (the task's coroutine, or
the next middleware's), and whatever awaitable a middleware returns is
awaited by the worker. So a plain ``def mw(job, call_next): return
call_next()`` wraps both kinds of task, and an ``async def`` middleware
wraps async tasks, timing or guarding the whole run::

    @app.middleware
    async def timing(job, call_next):
        started = time.monotonic()
        try:
            return await call_next()
        finally:
            log.info("%s took %.3f s", job.task, time.monotonic() - started)

An ``async def`` middleware is skipped around sync tasks: there is no event
loop in a lane's thread to await it on. A plain middleware that works
around ``call_next()`` (times it, catches its errors) sees, for an async
task, only the coroutine being made, not the run: write it ``async def``.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from .errors import ConfigurationError
from .job import FailureKind, JobInfo

log = logging.getLogger("taskforge.hooks")

EVENTS = ("job_started", "job_succeeded", "job_failed", "job_dead", "worker_started", "worker_stopping")

Middleware = Callable[[JobInfo, Callable[[], Any]], Any]


@dataclass(frozen=True)
class Event:
    """What a hook receives. ``job`` is None for worker events."""

    name: str
    job: JobInfo | None = None
    result: Any = None
    error: str | None = None

    @property
    def failure(self) -> FailureKind | None:
        """Why the job failed, for ``job_failed`` and ``job_dead`` (``job.failure``); None otherwise."""
        return self.job.failure if self.job is not None else None


class Hooks:
    """An app's hooks and middleware, in registration order."""

    def __init__(self) -> None:
        self.handlers: dict[str, list[Callable[[Event], Any]]] = {name: [] for name in EVENTS}
        self.middleware: list[Middleware] = []

    def on(self, name: str) -> Callable[[Callable[[Event], Any]], Callable[[Event], Any]]:
        if name not in self.handlers:
            raise ConfigurationError(f"unknown event {name!r}; use one of: {', '.join(EVENTS)}")

        def register(func: Callable[[Event], Any]) -> Callable[[Event], Any]:
            self.handlers[name].append(func)
            return func

        return register

    def add_middleware(self, func: Middleware) -> Middleware:
        if not callable(func):
            raise ConfigurationError(f"@app.middleware decorates a function (job_info, call_next), not {func!r}")
        self.middleware.append(func)
        return func

    def emit(self, name: str, job: JobInfo | None = None, result: Any = None, error: str | None = None) -> None:
        handlers = self.handlers[name]
        if not handlers:
            return
        event = Event(name, job, result, error)
        for handler in handlers:
            try:
                handler(event)
            except Exception:
                log.exception(
                    "hook %s for %s raised; the job is not affected", getattr(handler, "__name__", handler), name
                )

    def run(self, job: JobInfo, call: Callable[[], Any]) -> Any:
        """Call ``call`` inside every middleware but the ``async def`` ones, the first registered outermost."""
        for middleware in reversed(self.middleware):
            if not inspect.iscoroutinefunction(middleware):
                call = _bind(middleware, job, call)
        return call()

    async def arun(self, job: JobInfo, call: Callable[[], Awaitable[Any]]) -> Any:
        """Await ``call()`` (an async task's coroutine) inside every middleware, the first registered outermost."""
        for middleware in reversed(self.middleware):
            call = _abind(middleware, job, call)
        return await call()


def _bind(middleware: Middleware, job: JobInfo, call_next: Callable[[], Any]) -> Callable[[], Any]:
    return lambda: middleware(job, call_next)


def _abind(middleware: Middleware, job: JobInfo, call_next: Callable[[], Awaitable[Any]]) -> Callable[[], Any]:
    async def step() -> Any:
        value = middleware(job, call_next)
        return await value if inspect.isawaitable(value) else value

    return step
