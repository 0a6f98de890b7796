"""``TaskforgeBackend``: ``django.tasks`` enqueue and ``get_result`` on a taskforge app."""

from __future__ import annotations

import inspect
from datetime import datetime, timezone
from typing import Any

from django.tasks import TaskResult, TaskResultStatus
from django.tasks.backends.base import BaseTaskBackend
from django.tasks.base import Task as DjangoTask
from django.tasks.exceptions import TaskResultDoesNotExist
from django.tasks.signals import task_enqueued
from django.utils.module_loading import import_string

from ...app import TaskForge
from ...errors import ConfigurationError, JobNotFound
from ...job import JobInfo, Priority
from ...task import Task
from .results import _STATUS, _error, _task_result
from .runner import ARUN, RUN, _arun, _run


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


def _aware(when: datetime) -> datetime:
    return when if when.tzinfo is not None else when.replace(tzinfo=timezone.utc)
