# Generated from its async source by scripts/make_sync.py: do not edit.
"""One run of a Django task in the worker: the task by path, its call, Django's signals around it.

Written once, awaited (``_async/running.py``, the runner of coroutine tasks
on the worker's event loop); ``_sync/running.py``, the runner of plain
tasks, is generated from it by ``scripts/make_sync.py``, so the two cannot
drift apart. See ``runner.py`` for what the signals and the JSON check do.
"""

from __future__ import annotations

import contextlib
from typing import Any

from django.tasks.base import TaskContext
from django.tasks.signals import task_finished, task_started

from ....context import CurrentJob, current_job
from ....errors import TaskforgeError
from ..results import ATTEMPT, ERROR
from ..runner import _failed, _running, _succeeded, attempt_record, error_record
from ..values import as_json


def _run(path: str, args: list[Any], kwargs: dict[str, Any], takes_context: bool, meta: Any = None) -> Any:
    """The runner task: the task imported by path, called with its arguments, its signals sent around it."""
    task, result = _running(path, args, kwargs, meta)
    job = current_job()
    _keep(job, ATTEMPT.format(job.attempt), attempt_record(job))
    sender = type(task.get_backend())
    task_started.send_robust(sender, task_result=result)
    try:
        if takes_context:
            value = task.func(TaskContext(task_result=result), *args, **kwargs)
        else:
            value = task.func(*args, **kwargs)
        value = as_json(value)
    except BaseException as exc:
        _keep(job, ERROR.format(job.attempt), error_record(exc))
        _failed(result, exc)
        task_finished.send_robust(sender, task_result=result)
        raise
    _succeeded(result, value)
    task_finished.send_robust(sender, task_result=result)
    return value


def _keep(job: CurrentJob, name: str, record: dict[str, str] | None) -> None:
    """Keep ``record`` as the job's step ``name`` (``runner.py``): a run that lost its job or Redis keeps
    nothing and ends as it would have."""
    if record is not None:
        with contextlib.suppress(TaskforgeError, ConnectionError):
            job.step(name, dict, record)
