"""Django's ``TaskResult`` and ``Task`` rebuilt from what a job carries: its record, or the run in progress."""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Any

from django.core.exceptions import SuspiciousOperation
from django.tasks import TaskResult, TaskResultStatus
from django.tasks.base import Task as DjangoTask
from django.tasks.base import TaskError

from ...job import FailureKind, JobInfo, JobState
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

# The steps each run keeps with its job (``runner.py``), what the record keeps only for the latest run.
ATTEMPT = "django.attempt.{}"  # run N: {"worker_id", "started_at"}
ERROR = "django.error.{}"  # run N, if it raised: {"exception_class_path", "traceback"}

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


def task_errors(info: JobInfo, failed: bool) -> list[TaskError]:
    """One ``TaskError`` per run that failed, in order, as Django's own backends keep them.

    A run that raised kept its error as a step of the job (``runner.py``);
    the record's own error is the latest failure's, and is added where no
    step holds it: a run killed, timed out or lost, a job cancelled, or a
    job run before the steps were written.
    """
    stored: dict[int, TaskError] = {}
    for attempt in range(1, info.attempts + 1):
        step = info.steps.get(ERROR.format(attempt))
        if isinstance(step, dict) and isinstance(step.get("traceback"), str):
            path = exception_class_path(str(step.get("exception_class_path")), step["traceback"])
            stored[attempt] = TaskError(exception_class_path=path, traceback=step["traceback"])
    errors = [stored[attempt] for attempt in sorted(stored)]
    if info.error or failed:
        # The latest failure is the current run's only once that run has ended without success.
        attempt = info.attempts - 1 if info.state in (JobState.RUNNING, JobState.SUCCEEDED) else info.attempts
        if not (attempt in stored and info.failure in (FailureKind.EXCEPTION, FailureKind.RETRY)):
            errors.insert(sum(1 for n in stored if n <= attempt), task_error(info))
    return errors


def runs(info: JobInfo) -> tuple[list[str], datetime | None]:
    """``worker_ids`` (one per run, each the worker's id as ``taskforge status`` lists it) and the first run's start.

    From the steps each run kept (``runner.py``); a run that kept none (its
    worker died first, or it ran before the steps were written) is named by
    its queue, as it was before.
    """
    ids, first = [], None
    for attempt in range(1, info.attempts + 1):
        step = info.steps.get(ATTEMPT.format(attempt))
        step = step if isinstance(step, dict) else {}
        worker = step.get("worker_id")
        ids.append(worker if isinstance(worker, str) and worker else f"taskforge:{info.queue}")
        if attempt == 1 and info.attempts > 1:
            first = from_text(step.get("started_at"))
    return ids, first or info.started_at


def _task_result(
    task: DjangoTask,
    result_id: str,
    status: TaskResultStatus,
    args: list[Any],
    kwargs: dict[str, Any],
    backend: str,
    **times: Any,
) -> TaskResult:
    """A ``TaskResult``; ``times``: enqueued_at, started_at, last_attempted_at (started_at by default),
    finished_at, errors, worker_ids (None / [])."""
    return TaskResult(
        task=task,
        id=result_id,
        status=status,
        enqueued_at=for_django(times.get("enqueued_at")),
        started_at=for_django(times.get("started_at")),
        finished_at=for_django(times.get("finished_at")),
        last_attempted_at=for_django(times.get("last_attempted_at", times.get("started_at"))),
        args=args,
        kwargs=kwargs,
        backend=backend,
        errors=times.get("errors", []),
        worker_ids=times.get("worker_ids", []),
    )
