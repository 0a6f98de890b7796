"""Celery spellings taskforge does not have, each with what to write instead.

A Celery port meets these first: ``from taskforge import AsyncResult``,
``handle.state``, ``self.retry(...)``, ``@app.task(bind=True)``,
``add.apply_async(expires=...)``. A bare ``AttributeError`` or "unexpected
keyword argument" would send the reader to the docs; these errors name the
taskforge way in the message itself. Kept in one table per place so the
migration page (``docs/tutorials/coming-from.md``) and the errors cannot drift apart unnoticed
(``tests/test_celery_landing.py`` walks them). The RQ, Dramatiq and Huey
names are in ``other_names.py``; the errors here consult them next.
"""

from __future__ import annotations

from collections.abc import Mapping

from .other_names import MODULE as OTHER_MODULE
from .other_names import OPTIONS as OTHER_OPTIONS
from .other_names import OWNERS, attribute_hint, option_hints

# ``from taskforge import X``
MODULE = {
    "AsyncResult": "app.job(job_id) gives the JobHandle of a job id (its .result(), .status(), .info())",
    "GroupResult": "app.workflow(workflow_id) gives the WorkflowHandle of a group or chain",
    "Celery": "TaskForge('proj', broker=...) is the app",
    "shared_task": "register tasks on the app: @app.task",
    "signature": "task.s(*args, **kwargs) (or task.si(...)) builds a signature",
    "states": "JobState holds the states (pending, scheduled, deferred, running, retrying, succeeded, dead, cancelled)",
    "current_app": "import your app where you need it; inside a task, current_job() names the job",
}

# ``app.X`` on a TaskForge (Celery's app methods and settings)
APP = {
    "AsyncResult": "app.job(job_id) gives the JobHandle of a job id (its .result(), .status(), .info())",
    "GroupResult": "app.workflow(workflow_id) gives the WorkflowHandle of a group or chain",
    "send_task": "app.send('proj.tasks.add', *args, **kwargs) queues a job by task name",
    "conf": "settings are TaskForge(...) arguments (broker=, retention=...) and each task's own "
    "(@app.task(queue=..., max_attempts=...)); the broker URL may come from TASKFORGE_BROKER_URL",
    "config_from_object": "settings are TaskForge(...) arguments (broker=, retention=...); "
    "the broker URL may come from TASKFORGE_BROKER_URL",
    "autodiscover_tasks": "TaskForge('proj', include=['proj.tasks']) names the modules a worker imports",
    "control": "there is no remote control: restart workers with other options (taskforge status shows them)",
    "Task": "there are no Task subclasses: use @app.middleware and @app.on(event) hooks",
}

# ``handle.X`` on a JobHandle
HANDLE = {
    "state": "handle.status() returns the JobState",
    "task_id": "handle.id is the job id",
    "ready": "handle.status().finished says whether the job has finished",
    "successful": "handle.status() is JobState.SUCCEEDED",
    "failed": "handle.status() is JobState.DEAD",
    "wait": "handle.result(timeout=...) (or .get(timeout=...)) waits for the value",
    "traceback": "handle.info().traceback holds the remote traceback",
    "revoke": "handle.cancel() (not started yet) or handle.abort() (running too)",
    "forget": "finished records vanish by themselves after the app's retention",
    "date_done": "handle.info().finished_at",
    "children": "workflows: chain(...) / group(...) return a WorkflowHandle",
}

# ``handle.X`` on a WorkflowHandle (what Celery's chain, group and chord calls return)
WORKFLOW = {
    "state": "handle.status() returns the WorkflowState",
    "task_id": "handle.id is the workflow id",
    "ready": "handle.status().finished says whether the workflow has finished",
    "successful": "handle.status() is WorkflowState.SUCCEEDED",
    "failed": "handle.status() is WorkflowState.DEAD",
    "wait": "handle.result(timeout=...) (or .get(timeout=...)) waits for the value",
    "join": "handle.result(timeout=...) (or .get(timeout=...)) gives a group's results as a list",
    "revoke": "handle.cancel(): steps not started never run",
    "forget": "finished records vanish by themselves after the app's retention",
    "parent": "handle.info().steps lists every step's JobInfo, in order; app.job(step.id) is a step's JobHandle",
    "children": "handle.info().steps lists every step's JobInfo, in order; app.job(step.id) is a step's JobHandle",
    "results": "handle.info().steps lists every step's JobInfo, in order; app.job(step.id) is a step's JobHandle",
    "completed_count": "handle.info().steps: count the steps whose state is JobState.SUCCEEDED",
}

# ``task.X`` on a Task, and ``current_job().X`` inside one
TASK = {
    "retry": "raise Retry(after=seconds, exc=err) inside the task (retries are on by default: max_attempts=3)",
    "update_state": "current_job().set_progress(fraction, message, meta={...})",
    "request": "current_job() gives the running job's id, attempt, task, queue and headers",
    "signature": "task.s(*args, **kwargs) (or task.si(...)) builds a signature",
    "subtask": "task.s(*args, **kwargs) (or task.si(...)) builds a signature",
    "set": "task.with_options(queue=..., priority=...) returns a task whose jobs use those options",
    "AsyncResult": "app.job(job_id) gives the JobHandle of a job id",
    "apply": "call the task plainly to run it now (task(...)), or app.drain() in tests",
    "map": "task.delay_many([...]) queues many calls in one round trip",
    "starmap": "task.delay_many([...]) queues many calls in one round trip",
    "chunks": "task.delay_many([...]) queues many calls in one round trip",
}

# keyword options of ``@app.task(...)`` (and its ``task.apply_async(...)``) that Celery has
OPTIONS = {
    "bind": "there is no self: current_job() inside the task gives its id, attempt and set_progress()",
    "base": "there are no Task subclasses: use @app.middleware and @app.on(event) hooks",
    "autoretry_for": "every exception is retried by default; retry_on=(...) limits it, dont_retry_on=(...) excludes",
    "max_retries": "max_attempts=N counts total runs (Celery's max_retries + 1); the default is 3",
    "retry_backoff": "backoff=seconds (the base of an exponential backoff with jitter) or a callable",
    "retry_backoff_max": "the backoff is capped at one hour; give backoff=callable for another cap",
    "retry_jitter": "the backoff always has jitter",
    "default_retry_delay": "backoff=seconds, or raise Retry(after=seconds)",
    "time_limit": "timeout=seconds (the hard kill)",
    "soft_time_limit": "soft_timeout=seconds (SoftTimeout raised inside the task)",
    "acks_late": "every job is acknowledged when it finishes and reclaimed if its worker dies",
    "ignore_result": "results are always kept for the app's retention",
    "serializer": "arguments and results are msgpack; there is no other serializer",
    "compression": "arguments and results are msgpack, not compressed",
    "expires": "task.with_options(expires=...).delay(...) or @app.task(expires=...)",
    "retry": "enqueueing is not retried by a policy: a BrokerUnavailable says so, and with_options(job_id=) "
    "makes sending again safe",
    "retry_policy": "enqueueing is not retried by a policy: a BrokerUnavailable says so, and with_options(job_id=) "
    "makes sending again safe",
    "link": "chain(task.s(...), next.s()) runs a step after another",
    "link_error": "chain(..., on_failure=handler.s()) runs a step when one fails",
    "routing_key": "queue= names the queue",
    "exchange": "queue= names the queue",
    "headers": "producer hooks (@app.around_enqueue) set headers",
    "shadow": "name= on @app.task names the task",
    "track_started": "the running state is always recorded",
    "typing": "calls are always checked against the function's signature before they are stored",
}

# keyword options of Celery's ``AsyncResult.get(...)``, refused by ``JobHandle.get`` and ``WorkflowHandle.get``
GET = {
    "propagate": "a dead or cancelled job always raises TaskFailed; catch it (its error_type names the class)",
    "interval": "result() blocks on Redis until the job ends; there is no polling interval",
    "disable_sync_subtasks": "waiting inside a task is allowed; prefer chain(...) to waiting",
    "follow_parents": "workflows: WorkflowHandle.result() waits for the whole chain",
}


def _message(where: str, name: str, table: Mapping[str, str]) -> str:
    return f"{where} has no {name!r} (a Celery name): {table[name]}"


def module_error(name: str) -> ImportError | None:
    """The error for ``from taskforge import name``, or None when no other queue has such a name either.

    An ImportError, not an AttributeError: ``from m import x`` replaces an
    AttributeError with its own bare "cannot import name", losing the hint.
    """
    if name in MODULE:
        return ImportError(_message("taskforge", name, MODULE), name=name)
    other = attribute_hint("taskforge", name, OTHER_MODULE)
    return None if other is None else ImportError(other, name=name)


def attribute_error(owner: str, name: str, table: Mapping[str, str]) -> AttributeError:
    """The error for ``owner.name``: the hint for a Celery name, then another queue's, else Python's own wording."""
    if name in table:
        return AttributeError(_message(owner, name, table))
    other = attribute_hint(owner, name, OWNERS.get(owner, {}))
    return AttributeError(other or f"{owner!r} object has no attribute {name!r}")


def reject_options(where: str, options: Mapping[str, object]) -> None:
    """TypeError for keyword options taskforge does not take, naming the taskforge way for Celery's (and
    RQ's, Dramatiq's and Huey's)."""
    if not options:
        return
    hints = [f"{name}=: {OPTIONS[name]}" for name in options if name in OPTIONS]
    hints += option_hints({k: v for k, v in options.items() if k not in OPTIONS}, OTHER_OPTIONS)
    unknown = [name for name in options if name not in OPTIONS and name not in OTHER_OPTIONS]
    parts = []
    if hints:
        parts.append("; ".join(hints))
    if unknown:
        parts.append(f"unexpected keyword argument(s) {', '.join(map(repr, unknown))}")
    raise TypeError(f"{where}: " + "; ".join(parts))


def reject_get_options(where: str, options: Mapping[str, object]) -> None:
    """TypeError for keyword options of ``get()``/``aget()``, naming the taskforge way for Celery's."""
    if options:
        hints = "; ".join(f"{name}=: {GET.get(name, 'not an option of taskforge')}" for name in options)
        raise TypeError(f"{where}: {hints}")
