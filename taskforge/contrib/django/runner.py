"""The two runner tasks a worker runs Django tasks with: the task by path, its call, Django's signals around it.

``task_started`` and ``task_finished`` (``django.tasks.signals``) are sent in
the worker around each run, as Django's own backends send them, so Django's
``RUNNING`` / ``SUCCESSFUL`` / ``FAILED`` log lines and a project's receivers
work; ``task_finished`` of a failure is sent inside the exception handler,
where Django's receiver logs the traceback. A receiver that raises is
logged by Django (``send_robust``) and does not change the task's outcome.
The return value is normalized to JSON, so a value JSON cannot hold fails
the task with ``TypeError``, as Django requires.
"""

from __future__ import annotations

from traceback import format_exception
from typing import Any

from django.tasks import TaskResult, TaskResultStatus
from django.tasks.base import Task as DjangoTask
from django.tasks.base import TaskContext, TaskError
from django.tasks.signals import task_finished, task_started

from ...context import current_job
from .results import _task_result, task_from
from .values import as_json, for_django, from_text, now

RUN = "django.task"
ARUN = "django.atask"


def _run(path: str, args: list[Any], kwargs: dict[str, Any], takes_context: bool, meta: Any = None) -> Any:
    """The runner of a plain Django task: imported by path, called with its arguments."""
    task, result = _running(path, args, kwargs, meta)
    sender = type(task.get_backend())
    task_started.send_robust(sender, task_result=result)
    try:
        if takes_context:
            value = task.func(TaskContext(task_result=result), *args, **kwargs)
        else:
            value = task.func(*args, **kwargs)
        value = as_json(value)
    except BaseException as exc:
        _failed(result, exc)
        task_finished.send_robust(sender, task_result=result)
        raise
    _succeeded(result, value)
    task_finished.send_robust(sender, task_result=result)
    return value


async def _arun(path: str, args: list[Any], kwargs: dict[str, Any], takes_context: bool, meta: Any = None) -> Any:
    """The runner of a coroutine Django task, on the worker's event loop."""
    task, result = _running(path, args, kwargs, meta)
    sender = type(task.get_backend())
    await task_started.asend_robust(sender, task_result=result)
    try:
        if takes_context:
            value = await task.func(TaskContext(task_result=result), *args, **kwargs)
        else:
            value = await task.func(*args, **kwargs)
        value = as_json(value)
    except BaseException as exc:
        _failed(result, exc)
        await task_finished.asend_robust(sender, task_result=result)
        raise
    _succeeded(result, value)
    await task_finished.asend_robust(sender, task_result=result)
    return value


def _running(path: str, args: list[Any], kwargs: dict[str, Any], meta: Any) -> tuple[DjangoTask, TaskResult]:
    """The task as enqueued, and the RUNNING ``TaskResult`` its context and signals see."""
    meta = meta if isinstance(meta, dict) else {}  # jobs enqueued before the fifth argument have none
    job = current_job()
    task = task_from(job.id, path, meta)
    result = _task_result(
        task,
        job.id,
        TaskResultStatus.RUNNING,
        args,
        kwargs,
        task.backend,
        enqueued_at=from_text(meta.get("enqueued_at")),
        started_at=now(),
        worker_ids=[f"taskforge:{job.queue}"] * job.attempt,
    )
    return task, result


def _failed(result: TaskResult, exc: BaseException) -> None:
    kind = type(exc)
    error = TaskError(
        exception_class_path=f"{kind.__module__}.{kind.__qualname__}", traceback="".join(format_exception(exc))
    )
    result.errors.append(error)
    object.__setattr__(result, "status", TaskResultStatus.FAILED)
    object.__setattr__(result, "finished_at", for_django(now()))


def _succeeded(result: TaskResult, value: Any) -> None:
    object.__setattr__(result, "status", TaskResultStatus.SUCCESSFUL)
    object.__setattr__(result, "finished_at", for_django(now()))
    object.__setattr__(result, "_return_value", value)
