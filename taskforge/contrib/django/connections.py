"""Django's database connections around each task a worker runs, as Django's request cycle manages them.

A worker is a long-lived process: a connection that the server dropped
(a restart, an idle timeout) or that outlived ``CONN_MAX_AGE`` must be
closed before the next task uses it, or every later task fails with it.
``close_old_connections()`` before and after each run does that, as
Django does around each request, django-tasks' ``db_worker`` around each
task and Celery's Django fixup around each job. It runs in the thread that
runs the task (Django's connections are per thread): a sync task's lane
thread, or, for an ``async def`` task, the thread ``sync_to_async`` gives the
ORM. It costs no Redis call.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Any

from asgiref.sync import sync_to_async
from django.db import connections

from ...app import TaskForge
from ...hooks import Event
from ...job import JobInfo


def manage_connections(app: TaskForge) -> None:
    """Register the middleware on ``app`` (once, with the runner tasks), and close inherited connections at start."""
    app.middleware(DatabaseConnections(app))
    app.on("worker_started")(_close_inherited)


class DatabaseConnections:
    """Middleware: ``close_old_connections()`` (below) before and after every task of the app."""

    def __init__(self, app: TaskForge) -> None:
        self.app = app

    def __call__(self, job: JobInfo, call_next: Callable[[], Any]) -> Any:
        task = self.app.tasks.get(job.task)
        if task is not None and inspect.iscoroutinefunction(task.func):
            return _around_coroutine(call_next)
        close_old_connections()
        try:
            return call_next()
        finally:
            close_old_connections()


def close_old_connections() -> None:
    """Django's ``close_old_connections()``, but never a connection inside ``transaction.atomic()``.

    That transaction is the caller's: a test's ``TestCase``, or ``app.drain()``
    run inside one, whose connection closed under it would lose the
    transaction (Django's test client leaves it alone for the same reason).
    A worker's task cannot leave one open: ``atomic`` blocks end with it.
    """
    for connection in connections.all(initialized_only=True):
        if not connection.in_atomic_block:
            connection.close_if_unusable_or_obsolete()


async def _around_coroutine(call_next: Callable[[], Awaitable[Any]]) -> Any:
    await sync_to_async(close_old_connections)()
    try:
        return await call_next()
    finally:
        await sync_to_async(close_old_connections)()


def _close_inherited(_event: Event) -> None:
    """The supervisor's connections (opened by settings or app code at import) are not its children's to share."""
    connections.close_all()
