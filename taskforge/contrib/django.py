"""A backend for Django's own tasks framework (``django.tasks``, Django 6.0+) that queues on taskforge.

Settings::

    TASKS = {
        "default": {
            "BACKEND": "taskforge.contrib.django.TaskforgeBackend",
            "QUEUES": ["default", "emails"],           # taskforge queues of the same names
            "OPTIONS": {"BROKER": "redis://localhost:6379/0"},
            # or "OPTIONS": {"APP": "myproject.queue:app"}  (a TaskForge of your own)
        }
    }

Plain Django ``@task`` functions then ``.enqueue()`` / ``.aenqueue()`` onto
taskforge, and a worker runs them::

    DJANGO_SETTINGS_MODULE=mysite.settings taskforge worker taskforge.contrib.django:app

``taskforge.contrib.django:app`` calls ``django.setup()`` and is the
backend's TaskForge app (the ``default`` backend; another alias with
``TASKFORGE_DJANGO_BACKEND``). Each Django task travels as a job of one of
two runner tasks (``django.task`` for plain functions, ``django.atask`` for
coroutines) whose arguments are the task's import path and its call, so a
worker needs no list of Django tasks: it imports each by path, as Django's
own pickling of a ``Task`` does.

What the backend claims, honestly: ``supports_defer`` (``run_after`` is
``apply_at``), ``supports_async_task`` (coroutines run on the worker's event
loops), ``supports_get_result`` (the result id is the job id, read back from
the job record from any process) and ``supports_priority``, mapped onto
taskforge's four levels: below 0 low, 0 normal, 1 to 49 high, 50 and up
critical. Retries: Django's API has none, so a Django task runs once
(``max_attempts=1``) unless ``OPTIONS["MAX_ATTEMPTS"]`` says otherwise.
"""

from __future__ import annotations

import inspect
import os
from datetime import datetime, timezone
from typing import Any

from django.tasks import TaskResult, TaskResultStatus, task_backends
from django.tasks.backends.base import BaseTaskBackend
from django.tasks.base import Task as DjangoTask
from django.tasks.base import TaskContext, TaskError
from django.tasks.exceptions import TaskResultDoesNotExist
from django.tasks.signals import task_enqueued
from django.utils.module_loading import import_string

from ..app import TaskForge
from ..context import current_job
from ..errors import ConfigurationError, JobNotFound
from ..job import JobInfo, JobState, Priority
from ..task import Task

RUN = "django.task"
ARUN = "django.atask"

_STATUS = {
    JobState.PENDING: TaskResultStatus.READY,
    JobState.SCHEDULED: TaskResultStatus.READY,
    JobState.RETRYING: TaskResultStatus.READY,
    JobState.RUNNING: TaskResultStatus.RUNNING,
    JobState.SUCCEEDED: TaskResultStatus.SUCCESSFUL,
    JobState.DEAD: TaskResultStatus.FAILED,
    JobState.CANCELLED: TaskResultStatus.FAILED,
}


def priority_of(django_priority: int) -> Priority:
    """Django's -100..100 onto taskforge's four levels (documented above)."""
    if django_priority < 0:
        return Priority.LOW
    if django_priority == 0:
        return Priority.NORMAL
    return Priority.HIGH if django_priority < 50 else Priority.CRITICAL


class TaskforgeBackend(BaseTaskBackend):  # type: ignore[misc]
    """``django.tasks`` on taskforge: see the module's docstring for settings and semantics."""

    supports_defer = True
    supports_async_task = True
    supports_get_result = True
    supports_priority = True

    def __init__(self, alias: str, params: dict[str, Any]) -> None:
        super().__init__(alias, params)
        app_path = self.options.get("APP")
        if app_path:
            app = import_string(app_path.replace(":", "."))
            if not isinstance(app, TaskForge):
                raise ConfigurationError(f"TASKS[{alias!r}]['OPTIONS']['APP'] = {app_path!r} is not a TaskForge app")
        else:
            app = TaskForge(f"django-{alias}", broker=self.options.get("BROKER"))
        self.app = app
        attempts = self.options.get("MAX_ATTEMPTS", 1)
        if RUN not in app.tasks:
            app.task(name=RUN, max_attempts=attempts)(_run)
            app.task(name=ARUN, max_attempts=attempts)(_arun)

    def enqueue(self, task: DjangoTask, args: Any, kwargs: Any) -> TaskResult:
        runner, call = self._runner(task, args, kwargs)
        if task.run_after is not None:
            handle = runner.apply_at(_aware(task.run_after), *call)
        else:
            handle = runner.delay(*call)
        return self._enqueued(task, handle.id, args, kwargs)

    async def aenqueue(self, task: DjangoTask, args: Any, kwargs: Any) -> TaskResult:
        runner, call = self._runner(task, args, kwargs)
        if task.run_after is not None:
            handle = await runner.aapply_at(_aware(task.run_after), *call)
        else:
            handle = await runner.adelay(*call)
        return self._enqueued(task, handle.id, args, kwargs)

    def _runner(self, task: DjangoTask, args: Any, kwargs: Any) -> tuple[Task[Any, Any], tuple[Any, ...]]:
        """The runner task, set to the Django task's queue and priority, and its call."""
        self.validate_task(task)
        runner = self.app.tasks[ARUN if inspect.iscoroutinefunction(task.func) else RUN]
        runner = runner.with_options(queue=task.queue_name, priority=priority_of(task.priority))
        return runner, (task.module_path, list(args), dict(kwargs), task.takes_context)

    def _enqueued(self, task: DjangoTask, job_id: str, args: Any, kwargs: Any) -> TaskResult:
        result = _task_result(task, job_id, TaskResultStatus.READY, list(args), dict(kwargs), self.alias)
        object.__setattr__(result, "enqueued_at", datetime.now(timezone.utc))
        task_enqueued.send(type(self), task_result=result)
        return result

    def get_result(self, result_id: str) -> TaskResult:
        try:
            info = self.app.job(result_id).info()
        except (JobNotFound, ConfigurationError):
            raise TaskResultDoesNotExist(result_id) from None
        if info.task not in (RUN, ARUN) or len(info.args) != 4:
            raise TaskResultDoesNotExist(result_id)
        return self._result(info)

    async def aget_result(self, result_id: str) -> TaskResult:
        try:
            info = await self.app.job(result_id).ainfo()
        except (JobNotFound, ConfigurationError):
            raise TaskResultDoesNotExist(result_id) from None
        if info.task not in (RUN, ARUN) or len(info.args) != 4:
            raise TaskResultDoesNotExist(result_id)
        return self._result(info)

    def _result(self, info: JobInfo) -> TaskResult:
        path, args, kwargs, _ = info.args
        task = import_string(path)
        status = _STATUS.get(info.state, TaskResultStatus.READY)
        errors = [_error(info)] if status == TaskResultStatus.FAILED or (info.error and info.attempts > 1) else []
        finished = status in (TaskResultStatus.SUCCESSFUL, TaskResultStatus.FAILED)
        result = _task_result(
            task,
            info.id,
            status,
            list(args),
            dict(kwargs),
            self.alias,
            enqueued_at=info.created_at,
            started_at=info.started_at,
            finished_at=info.finished_at if finished else None,
            errors=errors,
            worker_ids=[f"taskforge:{info.queue}"] * info.attempts,
        )
        if status == TaskResultStatus.SUCCESSFUL:
            object.__setattr__(result, "_return_value", info.result)
        return result


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


def _aware(when: datetime) -> datetime:
    return when if when.tzinfo is not None else when.replace(tzinfo=timezone.utc)


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


def __getattr__(name: str) -> Any:
    """``taskforge.contrib.django:app`` for ``taskforge worker``: Django set up, the backend's app."""
    if name != "app":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import django

    if not os.environ.get("DJANGO_SETTINGS_MODULE"):
        raise ConfigurationError(
            "taskforge.contrib.django:app needs DJANGO_SETTINGS_MODULE (e.g. DJANGO_SETTINGS_MODULE=mysite.settings)"
        )
    django.setup()
    alias = os.environ.get("TASKFORGE_DJANGO_BACKEND", "default")
    try:
        backend = task_backends[alias]
    except Exception as exc:  # InvalidTaskBackend, ImproperlyConfigured: the settings' own words
        raise ConfigurationError(f"TASKS[{alias!r}]: {exc}") from None
    if not isinstance(backend, TaskforgeBackend):
        raise ConfigurationError(f"TASKS[{alias!r}] uses {type(backend).__name__}, not TaskforgeBackend")
    return backend.app
