"""Django's ``TaskResult`` and ``Task`` rebuilt from what a job carries: its record, or the run in progress."""

from __future__ import annotations

import dataclasses
from typing import Any

from django.core.exceptions import SuspiciousOperation
from django.tasks import TaskResult, TaskResultStatus
from django.tasks.base import Task as DjangoTask
from django.tasks.base import TaskError

from ...job import JobInfo, JobState
from .errors import exception_class_path
from .paths import resolve
from .values import for_django, from_text

_STATUS = {
    JobState.PENDING: TaskResultStatus.READY,
    JobState.SCHEDULED: TaskResultStatus.READY,
    JobState.DEFERRED: TaskResultStatus.READY,  # waits for the jobs it depends on
    JobState.RETRYING: TaskResultStatus.READY,
    JobState.RUNNING: TaskResultStatus.RUNNING,
    JobState.SUCCEEDED: TaskResultStatus.SUCCESSFUL,
    JobState.DEAD: TaskResultStatus.FAILED,
    JobState.CANCELLED: TaskResultStatus.FAILED,
}

# What a job keeps of the Task it was enqueued as (its ``using()``), beside the import path.
OPTIONS = ("priority", "queue_name", "backend")


def task_from(job_id: str, path: str, meta: dict[str, Any]) -> DjangoTask:
    """The Django task at ``path`` as it was enqueued; ``SuspiciousOperation`` if the path names no task.

    A job's path is data from Redis: it is imported only when the backend
    that enqueued it vouched for it (``paths.py``), and the worker calls only
    what is a ``Task``, as django-tasks' database backend does with its rows.
    """
    found = resolve(path, meta)
    if not isinstance(found, DjangoTask):
        raise SuspiciousOperation(f"Task {job_id} does not point to a Task ({path})")
    changes: dict[str, Any] = {name: meta[name] for name in OPTIONS if name in meta}
    run_after = from_text(meta.get("run_after"))
    if run_after is not None:
        changes["run_after"] = for_django(run_after)
    return dataclasses.replace(found, **changes) if changes else found


def task_error(info: JobInfo) -> TaskError:
    """Django names the exception by import path; taskforge keeps its text and traceback."""
    text = info.traceback or info.error or ""
    return TaskError(exception_class_path=exception_class_path(info.error_type, text), traceback=text)


def _task_result(
    task: DjangoTask,
    result_id: str,
    status: TaskResultStatus,
    args: list[Any],
    kwargs: dict[str, Any],
    backend: str,
    **times: Any,
) -> TaskResult:
    """A ``TaskResult``; ``times``: enqueued_at, started_at, finished_at, errors, worker_ids (None / [])."""
    return TaskResult(
        task=task,
        id=result_id,
        status=status,
        enqueued_at=for_django(times.get("enqueued_at")),
        started_at=for_django(times.get("started_at")),
        finished_at=for_django(times.get("finished_at")),
        last_attempted_at=for_django(times.get("started_at")),
        args=args,
        kwargs=kwargs,
        backend=backend,
        errors=times.get("errors", []),
        worker_ids=times.get("worker_ids", []),
    )
