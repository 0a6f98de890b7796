"""taskforge: a task queue for Python on Redis that never loses a job."""

import typing as _typing

from . import errors
from .errors import (
    BrokerUnavailable,
    ConfigurationError,
    CorruptQueue,
    JobNotFound,
    LeaseLost,
    QueueFull,
    Retry,
    SerializationError,
    SoftTimeout,
    TaskFailed,
    TaskforgeError,
    UnknownTask,
    WorkflowNotFound,
)

if _typing.TYPE_CHECKING:
    from .app import TaskForge
    from .context import CurrentJob, current_job
    from .handle import JobHandle
    from .job import JobInfo, JobState, Priority
    from .queue_handle import QueueHandle
    from .search import JobPage
    from .task import Task
    from .workflows.canvas import Signature, chain, chord, group
    from .workflows.handle import WorkflowHandle, WorkflowInfo, WorkflowState

# Loaded on first use rather than at import: these pull in redis-py and msgpack
# (about 0.25 s), and `taskforge worker` must be able to install its SIGTERM
# handler before that, so a worker stopped while it starts exits 0, not 143.
_LAZY = {
    "TaskForge": "app",
    "CurrentJob": "context",
    "current_job": "context",
    "JobHandle": "handle",
    "JobInfo": "job",
    "JobPage": "search",
    "JobState": "job",
    "Priority": "job",
    "QueueHandle": "queue_handle",
    "Task": "task",
    "Signature": "workflows.canvas",
    "chain": "workflows.canvas",
    "chord": "workflows.canvas",
    "group": "workflows.canvas",
    "WorkflowHandle": "workflows.handle",
    "WorkflowInfo": "workflows.handle",
    "WorkflowState": "workflows.handle",
}


def __getattr__(name: str) -> _typing.Any:
    module = _LAZY.get(name)
    if module is None:
        from .celery_names import module_error  # Celery's names (AsyncResult...) say what to use instead

        raise module_error(name) or AttributeError(f"module 'taskforge' has no attribute {name!r}")
    from . import app, context, handle, job, queue_handle, search, task  # one import loads them all anyway
    from .workflows import canvas
    from .workflows import handle as workflow_handle

    modules = {"app": app, "context": context, "handle": handle, "job": job, "search": search, "task": task}
    modules["queue_handle"] = queue_handle
    modules.update({"workflows.canvas": canvas, "workflows.handle": workflow_handle})
    value = getattr(modules[module], name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__version__ = "0.1.0"

__all__ = [
    "BrokerUnavailable",
    "ConfigurationError",
    "CorruptQueue",
    "CurrentJob",
    "JobHandle",
    "JobInfo",
    "JobNotFound",
    "JobPage",
    "JobState",
    "LeaseLost",
    "Priority",
    "QueueFull",
    "QueueHandle",
    "Retry",
    "SerializationError",
    "Signature",
    "SoftTimeout",
    "Task",
    "TaskFailed",
    "TaskForge",
    "TaskforgeError",
    "UnknownTask",
    "WorkflowHandle",
    "WorkflowInfo",
    "WorkflowNotFound",
    "WorkflowState",
    "__version__",
    "chain",
    "chord",
    "current_job",
    "errors",
    "group",
]
