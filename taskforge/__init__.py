"""taskforge: a task queue for Python on Redis that never loses a job."""

from . import errors
from .app import TaskForge
from .context import CurrentJob, current_job
from .errors import (
    BrokerUnavailable,
    ConfigurationError,
    CorruptQueue,
    JobNotFound,
    QueueFull,
    Retry,
    SerializationError,
    TaskFailed,
    TaskforgeError,
    UnknownTask,
)
from .handle import JobHandle
from .job import JobInfo, JobState, Priority
from .task import Task

__version__ = "0.1.0"

__all__ = [
    "BrokerUnavailable",
    "ConfigurationError",
    "CorruptQueue",
    "CurrentJob",
    "JobHandle",
    "JobInfo",
    "JobNotFound",
    "JobState",
    "Priority",
    "QueueFull",
    "Retry",
    "SerializationError",
    "Task",
    "TaskFailed",
    "TaskForge",
    "TaskforgeError",
    "UnknownTask",
    "__version__",
    "current_job",
    "errors",
]
