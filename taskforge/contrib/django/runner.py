"""The two runner tasks a worker runs Django tasks with: import the task by path, call it."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from django.tasks import TaskResultStatus
from django.tasks.base import Task as DjangoTask
from django.tasks.base import TaskContext
from django.utils.module_loading import import_string

from ...context import current_job
from .results import _task_result

RUN = "django.task"
ARUN = "django.atask"


def _context(task: DjangoTask, args: list[Any], kwargs: dict[str, Any]) -> TaskContext:
    job = current_job()
    result = _task_result(
        task,
        job.id,
        TaskResultStatus.RUNNING,
        args,
        kwargs,
        task.backend,
        started_at=datetime.now(timezone.utc),
        worker_ids=[f"taskforge:{job.queue}"] * job.attempt,
    )
    return TaskContext(task_result=result)


def _run(path: str, args: list[Any], kwargs: dict[str, Any], takes_context: bool) -> Any:
    """The runner of a plain Django task: imported by path, called with its arguments."""
    task: DjangoTask = import_string(path)
    if takes_context:
        return task.func(_context(task, args, kwargs), *args, **kwargs)
    return task.func(*args, **kwargs)


async def _arun(path: str, args: list[Any], kwargs: dict[str, Any], takes_context: bool) -> Any:
    """The runner of a coroutine Django task, on the worker's event loop."""
    task: DjangoTask = import_string(path)
    if takes_context:
        return await task.func(_context(task, args, kwargs), *args, **kwargs)
    return await task.func(*args, **kwargs)
