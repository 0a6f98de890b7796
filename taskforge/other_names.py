"""RQ, Dramatiq and Huey spellings taskforge does not have, each with its origin and what to write instead.

The Celery names are in ``celery_names.py``; these are the other queues'
(``Job.fetch``, ``@huey.periodic_task``, ``send_with_options(max_retries=)``,
``q.enqueue(f, job_timeout=30)``...). Those whose meaning taskforge has
work (``task.send``, ``send_with_options``, ``app.queue(name).enqueue``);
the rest raise an error that names the taskforge way, from these tables,
so the migration page (``docs/tutorials/coming-from.md``) and the errors
stay one list (``tests/test_other_landings.py`` walks them). Each entry is
``name: (origin, hint)``; where Celery has the same name, its hint wins.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

Hints = Mapping[str, tuple[str, str]]

_JOB = "app.job(job_id) gives the JobHandle of a job id (its .status(), .result(timeout=...), .info())"
_CHAIN = "a job that runs after another is a workflow step: chain(first.s(...), then.s(...)).delay()"

# ``from taskforge import X``
MODULE: Hints = {
    "Job": ("RQ", _JOB),
    "Queue": ("RQ", "app.queue(name) is a queue: app.queue('mail').enqueue(task, *args) sends a task there"),
    "get_current_job": ("RQ", "current_job() inside a task gives its id, attempt and set_progress()"),
    "actor": ("Dramatiq", "register tasks on the app: @app.task"),
    "Message": ("Dramatiq", _JOB),
    "periodic_task": ("Huey", "@app.periodic(cron='*/5 * * * *') or @app.periodic(every=60)"),
    "crontab": ("Huey", "@app.periodic(cron='*/5 * * * *') takes a 5-field cron string"),
}

# ``app.X`` on a TaskForge
APP: Hints = {
    "enqueue": ("RQ", "app.queue('default').enqueue(task, *args, **kwargs), or task.delay(*args, **kwargs)"),
    "enqueue_in": ("RQ", "app.queue('default').enqueue_in(timedelta, task, *args), or task.apply_in(seconds, *args)"),
    "enqueue_at": ("RQ", "app.queue('default').enqueue_at(datetime, task, *args), or task.apply_at(when, *args)"),
    "fetch_job": ("RQ", _JOB),
    "periodic_task": (
        "Huey",
        "@app.periodic(cron='*/5 * * * *') or @app.periodic(every=60) registers a task the workers enqueue "
        "on schedule (Huey's crontab(minute='*/5') is the cron string '*/5 * * * *')",
    ),
    "lock_task": (
        "Huey",
        "@app.task(concurrency=1) runs one job of the task at a time across workers "
        "(key=..., key_concurrency=1 for one per argument); a lock shared by several tasks is "
        "app.limit('name', concurrency=1) and @app.task(limits=['name']); unique=True refuses a second job "
        "while one is queued or running",
    ),
    "immediate": ("Huey", "taskforge.testing.set_eager(app, True), or app.drain() in tests"),
    "revoke_by_id": ("Huey", "app.job(job_id).cancel() (not started yet) or .abort() (running too)"),
    "actor": ("Dramatiq", "@app.task registers a task; task.send(...) queues it as Dramatiq's does"),
}

# ``queue.X`` on a QueueHandle (RQ's Queue)
QUEUE: Hints = {
    "fetch_job": ("RQ", _JOB),
    "enqueue_call": ("RQ", "queue.enqueue(task, *args, **kwargs), or task.apply_async(args, kwargs, queue=...)"),
    "count": ("RQ", "app.find_jobs(queue=name, state='pending') pages the queue's jobs; taskforge status counts"),
    "job_ids": ("RQ", "app.find_jobs(queue=name) pages the queue's jobs"),
    "jobs": ("RQ", "app.find_jobs(queue=name) pages the queue's jobs"),
    "empty": ("RQ", "taskforge purge APP --queue NAME (the CLI) deletes a queue's queued jobs"),
}

# ``handle.X`` on a JobHandle (RQ's Job, Dramatiq's Message, Huey's Result)
HANDLE: Hints = {
    "get_status": ("RQ", "handle.status() returns the JobState"),
    "return_value": ("RQ", "handle.result(timeout=...) waits for the value"),
    "latest_result": ("RQ", "handle.info() holds the state, result and error"),
    "is_finished": ("RQ", "handle.status() is JobState.SUCCEEDED"),
    "is_failed": ("RQ", "handle.status() is JobState.DEAD"),
    "is_queued": ("RQ", "handle.status() is JobState.PENDING"),
    "is_started": ("RQ", "handle.status() is JobState.RUNNING"),
    "exc_info": ("RQ", "handle.info().traceback holds the remote traceback"),
    "meta": ("RQ", "handle.info().progress_meta (set in the task by current_job().set_progress(..., meta=))"),
    "get_result": ("Dramatiq", "handle.result(timeout=seconds) waits for the value"),
    "message_id": ("Dramatiq", "handle.id is the job id"),
    "revoke": ("Huey", "handle.cancel() (not started yet) or handle.abort() (running too)"),
}

# ``task.X`` on a Task (Huey's task methods; Dramatiq's send and send_with_options work)
TASK: Hints = {
    "schedule": ("Huey", "add.apply_in(seconds, *args, **kwargs) or add.apply_at(when, *args, **kwargs)"),
    "call_local": ("Huey", "call the task plainly: add(1, 2) runs inline, in this process; add.delay(1, 2) queues"),
    "revoke": ("Huey", "app.job(job_id).cancel() cancels one job"),
    "message": ("Dramatiq", "task.s(*args, **kwargs) builds a call not yet sent, for chain() and group()"),
    "message_with_options": ("Dramatiq", "task.s(*args, **kwargs) builds a call not yet sent, for chain() and group()"),
}

# keyword options of ``@app.task(...)`` from the other queues' decorators (Dramatiq's actor, Huey's task)
OPTIONS: Hints = {
    "retries": ("Huey", "max_attempts=N counts total runs (Huey's retries + 1); the default is 3"),
    "retry_delay": ("Huey", "backoff=seconds (the base of an exponential backoff with jitter)"),
    "context": ("Huey", "there is no task argument: current_job() inside the task gives its id and attempt"),
    "queue_name": ("Dramatiq", "queue= names the queue"),
    "actor_name": ("Dramatiq", "name= names the task"),
    "actor_class": ("Dramatiq", "there are no actor classes: use @app.middleware and @app.on(event) hooks"),
    "min_backoff": ("Dramatiq", "backoff=seconds (the base of an exponential backoff with jitter; Dramatiq's is ms)"),
    "max_backoff": ("Dramatiq", "the backoff is capped at one hour; give backoff=callable for another cap"),
    "retry_when": ("Dramatiq", "retry_on=(SomeError,) retries only these; dont_retry_on=(...) excludes"),
    "throws": ("Dramatiq", "dont_retry_on=(SomeError,) ends the job dead at once on these"),
    "max_age": ("Dramatiq", "expires=seconds (or a datetime): a job not started by then ends cancelled"),
    "store_results": ("Dramatiq", "results are always kept for the app's retention"),
    "result_ttl": ("RQ", "TaskForge(retention=...) keeps finished records that long"),
    "failure_ttl": ("RQ", "TaskForge(dead_retention=...) keeps dead records that long"),
}

# keyword options of Dramatiq's ``send_with_options(...)`` that taskforge has another way for
SEND_OPTIONS: Hints = {
    "max_retries": ("Dramatiq", "max_attempts=N counts total runs (Dramatiq's max_retries + 1)"),
    "time_limit": ("Dramatiq", "timeout=seconds (the hard kill; Dramatiq's time_limit is ms)"),
    "min_backoff": ("Dramatiq", "@app.task(backoff=seconds) (the base of an exponential backoff with jitter)"),
    "max_backoff": ("Dramatiq", "the backoff is capped at one hour; give @app.task(backoff=callable) for another cap"),
    "retry_when": ("Dramatiq", "retry_on=(SomeError,) retries only these; dont_retry_on=(...) excludes"),
    "throws": ("Dramatiq", "dont_retry_on=(SomeError,) ends the job dead at once on these"),
    "max_age": ("Dramatiq", "expires=seconds (or a datetime): a job not started by then ends cancelled"),
    "on_success": ("Dramatiq", _CHAIN),
    "on_failure": ("Dramatiq", "chain(task.s(...), on_failure=handler.s()) runs a step when one fails"),
    "pipe_ignore": ("Dramatiq", "in a chain, task.si(...) is a step that does not get the previous result"),
    "notify_shutdown": ("Dramatiq", "a job stopped by shutdown is put back and run again; SoftTimeout warns a task"),
    "queue_name": ("Dramatiq", "queue= names the queue"),
}

# keywords of a call (``delay``, ``queue.enqueue``...) that RQ takes as options, not as the function's
CALL: Hints = {
    "depends_on": (
        "RQ",
        "task.apply_async((...), depends_on=job) waits for jobs that exist (a handle or an id, or a list; "
        "allow_failure=True runs it even when one fails); steps sent together are a chain(...)",
    ),
    "job_timeout": ("RQ", "@app.task(timeout=seconds), or task.with_options(timeout=seconds).delay(...)"),
    "result_ttl": ("RQ", "TaskForge(retention=...) keeps finished records that long"),
    "failure_ttl": ("RQ", "TaskForge(dead_retention=...) keeps dead records that long"),
    "ttl": ("RQ", "task.with_options(expires=seconds).delay(...): a job not started by then ends cancelled"),
    "job_id": ("RQ", "task.with_options(job_id=...).delay(...) names the job"),
    "at_front": ("RQ", "task.with_options(priority='high').delay(...) runs before normal jobs"),
    "retry": ("RQ", "@app.task(max_attempts=N, backoff=seconds); every exception is retried by default"),
    "meta": ("RQ", "current_job().set_progress(fraction, message, meta={...}) inside the task"),
    "description": ("RQ", "the task's name and arguments describe the job (taskforge job, the dashboard)"),
}

# which table answers for ``owner.X`` (the owner's name as the errors spell it)
OWNERS: Mapping[str, Hints] = {"TaskForge": APP, "Task": TASK, "JobHandle": HANDLE, "QueueHandle": QUEUE}

_ARTICLE = {"RQ": "an", "Dramatiq": "a", "Huey": "a"}


def named(origin: str) -> str:
    """``an RQ name``: the words every hint ends its first part with."""
    return f"{_ARTICLE[origin]} {origin}"


def attribute_hint(owner: str, name: str, table: Hints) -> str | None:
    """The message for ``owner.name`` when another queue has that name, else None."""
    if name not in table:
        return None
    origin, hint = table[name]
    return f"{owner} has no {name!r} ({named(origin)} name): {hint}"


def option_hints(options: Mapping[str, object], table: Hints) -> list[str]:
    """``name=: hint (a Dramatiq option)`` for each option the table knows."""
    return [f"{name}=: {table[name][1]} ({named(table[name][0])} option)" for name in options if name in table]


def refuse_options(where: str, options: Mapping[str, object], table: Hints) -> None:
    """TypeError for options not taken, each known one with the taskforge way; nothing is sent."""
    if not options:
        return
    parts = option_hints(options, table)
    unknown = [name for name in options if name not in table]
    if unknown:
        parts.append(f"unexpected keyword argument(s) {', '.join(map(repr, unknown))}")
    raise TypeError(f"{where}: " + "; ".join(parts))


def refuse_call_options(task: str, signature: inspect.Signature | None, kwargs: Mapping[str, Any]) -> None:
    """TypeError for RQ's call options given to a task that has no such parameter; before serializing.

    ``add.delay(1, depends_on=job)`` would otherwise fail as a handle that
    cannot be serialized, far from its cause. A parameter of that name takes
    the value as usual; a function with ``**kwargs`` takes it too, unless it
    is a job handle (which no job can carry).
    """
    given = [name for name in kwargs if name in CALL]
    if not given or signature is None:
        return
    params = signature.parameters
    var_keyword = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    refused = {
        name: kwargs[name]
        for name in given
        if (name not in params or params[name].kind is inspect.Parameter.POSITIONAL_ONLY)
        and (not var_keyword or _carries_a_handle(kwargs[name]))
    }
    if refused:
        hints = "; ".join(option_hints(refused, CALL))
        raise TypeError(f"{task}: {hints}; the job was not queued")


def _carries_a_handle(value: object) -> bool:
    """Whether ``value`` is a handle or a list of them (by class name: the handles import this module)."""
    values = value if isinstance(value, (list, tuple)) else (value,)
    return any(type(item).__name__ in ("JobHandle", "WorkflowHandle") for item in values)
