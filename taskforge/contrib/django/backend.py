"""``TaskforgeBackend``: ``django.tasks`` enqueue, ``get_result`` and system checks on a taskforge app."""

from __future__ import annotations

import inspect
import uuid
from datetime import datetime
from functools import partial
from typing import Any

from django.core import checks
from django.tasks import TaskResult, TaskResultStatus
from django.tasks.backends.base import BaseTaskBackend
from django.tasks.base import Task as DjangoTask
from django.tasks.exceptions import TaskResultDoesNotExist
from django.tasks.signals import task_enqueued
from django.utils.module_loading import import_string

from ...app import TaskForge
from ...decorator_options import check_option
from ...errors import BrokerUnavailable, ConfigurationError, JobNotFound
from ...handle import JobHandle
from ...job import JobInfo, Priority
from ...task import Task
from ._async.running import _arun
from ._sync.running import _run
from .connections import manage_connections
from .paths import MAC, path_mac
from .results import _STATUS, _task_result, runs, task_errors, task_from
from .runner import ARUN, RUN
from .values import as_json, aware, from_text, now, to_text


def priority_of(django_priority: int) -> Priority:
    """Django's -100..100 onto taskforge's four levels: below 0 low, 0 normal, 1 to 49 high, 50 and up critical."""
    if django_priority < 0:
        return Priority.LOW
    if django_priority == 0:
        return Priority.NORMAL
    return Priority.HIGH if django_priority < 50 else Priority.CRITICAL


class DjangoTaskForge(TaskForge):
    """The backend's own app (``OPTIONS["BROKER"]``): a worker of it serves every queue of ``QUEUES`` by default."""

    def __init__(self, name: str, broker: str | None, queues: set[str]) -> None:
        super().__init__(name, broker=broker)
        self.django_queues = sorted(queues)

    def queues(self) -> list[str]:
        return list(dict.fromkeys([*super().queues(), *self.django_queues]))


class TaskforgeBackend(BaseTaskBackend):  # type: ignore[misc]
    """``django.tasks`` on taskforge: see the package's docstring for settings and semantics."""

    supports_defer = True
    supports_async_task = True
    supports_get_result = True
    supports_priority = True

    def __init__(self, alias: str, params: dict[str, Any]) -> None:
        super().__init__(alias, params)
        app_path = self.options.get("APP")
        app: TaskForge
        if app_path:
            app = import_string(app_path.replace(":", "."))
            if not isinstance(app, TaskForge):
                raise ConfigurationError(f"TASKS[{alias!r}]['OPTIONS']['APP'] = {app_path!r} is not a TaskForge app")
        else:
            app = DjangoTaskForge(f"django-{alias}", self.options.get("BROKER"), self.queues)
        self.app = app
        attempts = self.options.get("MAX_ATTEMPTS", 1)
        if RUN not in app.tasks:
            app.task(name=RUN, max_attempts=attempts)(_run)
            app.task(name=ARUN, max_attempts=attempts)(_arun)
            manage_connections(app)

    def enqueue(self, task: DjangoTask, args: Any, kwargs: Any) -> TaskResult:
        runner, call, enqueued_at = self._prepare(task, args, kwargs)
        send = runner.delay if task.run_after is None else partial(runner.apply_at, aware(task.run_after))
        return self._enqueued(task, send(*call), call, enqueued_at)

    async def aenqueue(self, task: DjangoTask, args: Any, kwargs: Any) -> TaskResult:
        runner, call, enqueued_at = self._prepare(task, args, kwargs)
        send = runner.adelay if task.run_after is None else partial(runner.aapply_at, aware(task.run_after))
        return self._enqueued(task, await send(*call), call, enqueued_at)

    def _prepare(self, task: DjangoTask, args: Any, kwargs: Any) -> tuple[Task[Any, Any], tuple[Any, ...], datetime]:
        """The runner task, set to the Django task's queue and priority, and its call: checked before any store.

        The call is the task's path, its arguments as JSON gives them back
        (``TypeError`` here for what JSON cannot hold), whether it takes a
        context, and what ``get_result()`` needs to give the same Task and
        ``enqueued_at`` back: the ``using()`` options and the enqueue time.
        """
        self.validate_task(task)
        runner = self.app.tasks[ARUN if inspect.iscoroutinefunction(task.func) else RUN]
        # Django's backends give results UUID4 ids (its own tests check the
        # version), where taskforge's own ids are time-ordered (version 7).
        runner = runner.with_options(
            queue=task.queue_name, priority=priority_of(task.priority), job_id=uuid.uuid4().hex
        )
        stamp = now()  # to the millisecond, as the job record's own times: never after the started_at Redis gives
        enqueued_at = stamp.replace(microsecond=stamp.microsecond // 1000 * 1000)
        meta = {
            "priority": task.priority,
            "queue_name": task.queue_name,
            "backend": task.backend,
            "run_after": to_text(task.run_after),
            "enqueued_at": to_text(enqueued_at),
            MAC: path_mac(task.module_path),  # what lets a worker import the path (``paths.py``)
        }
        return (
            runner,
            (task.module_path, as_json(list(args)), as_json(dict(kwargs)), task.takes_context, meta),
            enqueued_at,
        )

    def _enqueued(
        self, task: DjangoTask, handle: JobHandle[Any], call: tuple[Any, ...], enqueued_at: datetime
    ) -> TaskResult:
        _, args, kwargs, _, _ = call
        result = _task_result(
            task, handle.id, TaskResultStatus.READY, args, kwargs, self.alias, enqueued_at=enqueued_at
        )
        task_enqueued.send(type(self), task_result=result)
        return result

    def get_result(self, result_id: str) -> TaskResult:
        try:
            info = self.app.job(result_id).info()
        except (JobNotFound, ConfigurationError):
            raise TaskResultDoesNotExist(result_id) from None
        return self._result(info)

    async def aget_result(self, result_id: str) -> TaskResult:
        try:
            info = await self.app.job(result_id).ainfo()
        except (JobNotFound, ConfigurationError):
            raise TaskResultDoesNotExist(result_id) from None
        return self._result(info)

    def _result(self, info: JobInfo) -> TaskResult:
        if info.task not in (RUN, ARUN) or len(info.args) not in (4, 5):
            raise TaskResultDoesNotExist(info.id)
        path, args, kwargs = info.args[:3]
        meta = info.args[4] if len(info.args) == 5 and isinstance(info.args[4], dict) else {}
        task = task_from(info.id, path, meta)
        status = _STATUS.get(info.state, TaskResultStatus.READY)
        worker_ids, started_at = runs(info)
        finished = status in (TaskResultStatus.SUCCESSFUL, TaskResultStatus.FAILED)
        result = _task_result(
            task,
            info.id,
            status,
            list(args),
            dict(kwargs),
            self.alias,
            enqueued_at=from_text(meta.get("enqueued_at")) or info.created_at,
            started_at=started_at,
            last_attempted_at=info.started_at,
            finished_at=info.finished_at if finished else None,
            errors=task_errors(info, status == TaskResultStatus.FAILED),
            worker_ids=worker_ids,
        )
        if status == TaskResultStatus.SUCCESSFUL:
            object.__setattr__(result, "_return_value", info.result)
        return result

    def check(self, **kwargs: Any) -> list[checks.CheckMessage]:
        """``manage.py check``: queue names taskforge cannot serve (checked as ``@app.task(queue=...)`` checks them),
        and a broker that cannot be reached.

        An empty ``QUEUES`` (any queue allowed) is Django's own setting and not
        flagged, as Django's tests require; ``manage.py taskforge_worker`` then
        serves the backend's default queue unless given ``-q``. An unreachable
        broker is a warning, not an error: Redis down for a moment must not stop
        ``migrate`` or ``runserver``, but nothing enqueued reaches it meanwhile.
        """
        found: list[checks.CheckMessage] = []
        for name in sorted(self.queues):
            try:
                check_option("queue", name)
            except ConfigurationError as exc:
                found.append(checks.Error(f"TASKS[{self.alias!r}]['QUEUES']: {exc}", id="taskforge.E001"))
        try:
            self.app.broker.ping()
        except BrokerUnavailable as exc:  # its message names the URL, password hidden, and the reason
            found.append(checks.Warning(f"TASKS[{self.alias!r}]: {exc}", id="taskforge.W001"))
        return found
