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

Each run also keeps, as a durable step of its job (``CurrentJob.step``),
what Django's ``TaskResult`` holds per attempt and the job record keeps only
for the latest: which worker ran it and when it started (``ATTEMPT``), and
the error it raised (``ERROR``). ``results.py`` reads them back.
"""

from __future__ import annotations

from traceback import format_exception
from typing import Any

from django.tasks import TaskResult, TaskResultStatus
from django.tasks.base import Task as DjangoTask
from django.tasks.base import TaskError

from ...context import CurrentJob, Slept, current_job
from .results import _task_result, task_from
from .values import for_django, from_text, now

RUN = "django.task"
ARUN = "django.atask"


def attempt_record(job: CurrentJob) -> dict[str, str]:
    """What ``TaskResult.worker_ids`` and the first run's ``started_at`` are rebuilt from."""
    return {"worker_id": job.worker_id, "started_at": job.started_at.isoformat()}


def error_record(exc: BaseException) -> dict[str, str] | None:
    """The ``TaskError`` of a run that raised; None for a run that only slept (``CurrentJob.sleep``)."""
    if isinstance(exc, Slept):
        return None
    kind = type(exc)
    path = f"{kind.__module__}.{kind.__qualname__}"
    return {"exception_class_path": path, "traceback": "".join(format_exception(exc))}


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
        worker_ids=[job.worker_id] * job.attempt,
    )
    return task, result


def _failed(result: TaskResult, exc: BaseException) -> None:
    record = error_record(exc)
    if record is not None:
        result.errors.append(TaskError(**record))
    object.__setattr__(result, "status", TaskResultStatus.FAILED)
    object.__setattr__(result, "finished_at", for_django(now()))


def _succeeded(result: TaskResult, value: Any) -> None:
    object.__setattr__(result, "status", TaskResultStatus.SUCCESSFUL)
    object.__setattr__(result, "finished_at", for_django(now()))
    object.__setattr__(result, "_return_value", value)
