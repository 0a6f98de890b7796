"""What the two runner tasks a worker runs Django tasks with share: the task by path, the result it reports.

The runners themselves (``_async/running.py``, awaited, and
``_sync/running.py``, generated from it) call the task and send Django's
signals around the call.

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
from django.tasks.base import TaskError

from ...context import current_job
from .results import _task_result, task_from
from .values import for_django, from_text, now

RUN = "django.task"
ARUN = "django.atask"


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
