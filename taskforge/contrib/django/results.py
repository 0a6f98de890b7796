"""Django's ``TaskResult`` built from what taskforge knows: a job record, or the run in progress."""

from __future__ import annotations

from typing import Any

from django.tasks import TaskResult, TaskResultStatus
from django.tasks.base import Task as DjangoTask
from django.tasks.base import TaskError

from ...job import JobInfo, JobState

_STATUS = {
    JobState.PENDING: TaskResultStatus.READY,
    JobState.SCHEDULED: TaskResultStatus.READY,
    JobState.RETRYING: TaskResultStatus.READY,
    JobState.RUNNING: TaskResultStatus.RUNNING,
    JobState.SUCCEEDED: TaskResultStatus.SUCCESSFUL,
    JobState.DEAD: TaskResultStatus.FAILED,
    JobState.CANCELLED: TaskResultStatus.FAILED,
}


def _error(info: JobInfo) -> TaskError:
    """Django names the exception by import path; taskforge keeps its text and traceback."""
    text = info.traceback or info.error or ""
    last = text.strip().splitlines()[-1] if text.strip() else ""
    name = last.partition(":")[0].strip() if last and " " not in last.partition(":")[0].strip() else ""
    if not name:
        name = "taskforge.errors.TaskFailed"
    elif "." not in name:
        name = f"builtins.{name}"
    return TaskError(exception_class_path=name, traceback=info.traceback or info.error or "")


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
        enqueued_at=times.get("enqueued_at"),
        started_at=times.get("started_at"),
        finished_at=times.get("finished_at"),
        last_attempted_at=times.get("started_at"),
        args=args,
        kwargs=kwargs,
        backend=backend,
        errors=times.get("errors", []),
        worker_ids=times.get("worker_ids", []),
    )
