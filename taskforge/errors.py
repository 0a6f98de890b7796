"""Every error a taskforge user can meet, under one root.

Catch ``TaskforgeError`` to handle them all::

    TaskforgeError
    ├── ConfigurationError          an invalid task option, app argument or broker URL
    ├── QueueFull                   max_size reached; the job was not stored
    ├── SerializationError          a value msgpack cannot carry; nothing was stored
    ├── CorruptPayload              bytes in Redis that are not a taskforge payload
    ├── CorruptQueue                a queue's fixed keys were overwritten; names the key
    ├── UnknownTask                 a job names a task the worker does not know
    ├── TaskFailed                  the job is dead; carries the remote error, its class path and traceback
    ├── SoftTimeout                 raised inside a task past its soft_timeout (catch it to clean up)
    ├── LeaseLost                   step() in a run that no longer holds its job (its lease ran out)
    ├── HardTimeout                 a run past its timeout was killed (a TimeoutError too)
    ├── WorkerCrashed               the child process running a job died
    ├── WorkerLost                  a job's lease expired: its whole worker died or lost Redis
    ├── CorruptJob                  a job's record cannot be run (junk written by something else)
    ├── Aborted                     JobHandle.abort() stopped the job
    ├── Expired                     the job was not started by its ``expires`` time
    ├── Interrupted                 a worker's shutdown cut the run short; the job runs again
    ├── QueueNotEmpty               forgetting a queue that still holds jobs; nothing was deleted
    ├── JobNotFound                 no such job (never existed, or past its retention)
    │   └── WorkflowNotFound        no such workflow
    ├── BrokerUnavailable           Redis cannot be reached; says which URL and what to do
    ├── AppNotFound                 the CLI's APP names no importable TaskForge app
    ├── BrokerStartError            the development broker cannot listen where asked
    ├── MetricsPortUnavailable      ``worker --metrics-port`` cannot be bound
    └── DashboardPortUnavailable    the dashboard's address cannot be bound

``HardTimeout`` to ``Interrupted`` are never raised in the caller's process:
they name why a worker ended a job, so that ``TaskFailed.error_type`` and
``JobInfo.error_type`` always hold the path of a class that imports.

The last four are met only through the command line; they live here with the
rest so that one module holds the whole tree (their old homes, ``loader``,
``devbroker``, ``metrics`` and ``dashboard.server``, re-export them).

``Retry`` is not an error: a task raises it to ask for another attempt later.
It derives from ``Exception`` so that it travels through user code like any
exception, and the runner recognises it before treating anything as a failure.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .job import FailureKind

__all__ = [
    "Aborted",
    "AppNotFound",
    "BrokerStartError",
    "BrokerUnavailable",
    "ConfigurationError",
    "CorruptJob",
    "CorruptPayload",
    "CorruptQueue",
    "DashboardPortUnavailable",
    "Expired",
    "HardTimeout",
    "Interrupted",
    "JobNotFound",
    "LeaseLost",
    "MetricsPortUnavailable",
    "QueueFull",
    "QueueNotEmpty",
    "Retry",
    "SerializationError",
    "SoftTimeout",
    "TaskFailed",
    "TaskforgeError",
    "UnknownTask",
    "WorkerCrashed",
    "WorkerLost",
    "WorkflowNotFound",
    "class_path",
    "error_type_of_kind",
]


class TaskforgeError(Exception):
    """Root of every error taskforge raises on purpose."""


class ConfigurationError(TaskforgeError, ValueError):
    """An option or argument is invalid; raised where it is given, not later."""


class QueueFull(TaskforgeError):
    """The queue holds ``max_size`` unfinished jobs; the new job was not stored."""


class SerializationError(TaskforgeError, TypeError):
    """A value cannot be carried by msgpack; nothing was stored."""


class CorruptPayload(TaskforgeError):
    """Bytes read from Redis are not a valid taskforge payload."""


class CorruptQueue(TaskforgeError):
    """A fixed key of a queue (pending, seq...) holds what taskforge never wrote there.

    Raised before anything was stored or moved: the scripts check the keys
    they write before their first write, because Redis does not undo a
    script's earlier writes when a later command fails.  ``queues`` names
    the queues that cannot be served until the key is mended.
    """

    def __init__(self, message: str, queues: tuple[str, ...] = ()):
        super().__init__(message)
        self.queues = queues


class UnknownTask(TaskforgeError):
    """A job names a task that is not registered in the app; the job is dead-lettered.

    ``named()`` words it the one way every worker and test expects: the task,
    the app, the tasks it does know, and what to do.
    """

    def __init__(self, message: str, task: str | None = None) -> None:
        super().__init__(message)
        self.task = task

    @classmethod
    def named(cls, task: str, app: str, known: Iterable[str]) -> UnknownTask:
        listed = ", ".join(sorted(known)) or "none"
        return cls(
            f"no task named {task!r} is registered in app {app!r} (known: {listed}); "
            "deploy the code that defines it, then retry the dead job",
            task,
        )


class QueueNotEmpty(TaskforgeError):
    """``taskforge queues forget``: the queue still holds jobs (waiting, running or dead); nothing was deleted."""

    def __init__(self, queue: str, holding: str) -> None:
        self.queue = queue
        self.holding = holding
        super().__init__(
            f"queue {queue!r} still holds {holding} jobs, so it was not forgotten: only an empty queue is; "
            f"purge it first (taskforge purge APP --queue {queue}; taskforge dead APP purge --queue {queue}), "
            "or let its running jobs end"
        )


class JobNotFound(TaskforgeError, LookupError):
    """No job with this id: it never existed or its record has expired."""


class WorkflowNotFound(JobNotFound):
    """No workflow with this id: it never existed or its record has expired."""


class SoftTimeout(TaskforgeError):
    """Raised inside a running task past its ``soft_timeout``: time to clean up; ``timeout`` still kills.

    In a worker child's only lane (the main thread) it interrupts a blocking
    call such as ``time.sleep``; in a ``-t`` lane it is raised when the task
    next runs Python code, so a blocking call ends first. An async task is
    cancelled instead (it sees ``CancelledError``).
    """

    def __init__(self, message: str = "the job ran past its soft timeout") -> None:
        super().__init__(message)


class LeaseLost(TaskforgeError):
    """Raised by ``current_job().step`` in a run that no longer holds its job (its lease ran out).

    Another run has the job, or will: this one must not store a step result
    that run would take for its own, and its outcome is discarded as any
    fenced run's is (the failure it records is refused too).
    """


class HardTimeout(TaskforgeError, TimeoutError):
    """A run went past its ``timeout``: a sync task's child was killed, an async task cancelled.

    Never raised in the caller's process: it is the ``error_type`` of such a
    run, and a ``TimeoutError`` too, so code branching on the remote class
    with ``issubclass`` reads it as the timeout it is.
    """


class WorkerCrashed(TaskforgeError):
    """The child process running the job died (a signal, ``os._exit``, out of memory)."""


class WorkerLost(TaskforgeError):
    """The job's lease expired: the worker running it died or lost Redis."""


class CorruptJob(TaskforgeError):
    """The job's record holds what taskforge never writes (its attempts, its id): dead-lettered, not run."""


class Aborted(TaskforgeError):
    """``JobHandle.abort()`` stopped the job."""


class Expired(TaskforgeError):
    """The job was not started by its ``expires`` time: it ended cancelled, unrun."""


class Interrupted(TaskforgeError):
    """A worker's shutdown (its grace ran out) cut the run short: the job went back and runs again."""


def class_path(error: BaseException | type[BaseException]) -> str:
    """``module.qualname`` of an exception (or its class): what ``error_type`` holds, e.g. ``builtins.ValueError``."""
    cls = error if isinstance(error, type) else type(error)
    return f"{cls.__module__}.{cls.__qualname__}"


def error_type_of_kind(kind: str) -> str:
    """The ``error_type`` of a run taskforge ended itself, by its ``FailureKind`` value.

    ``exception`` and ``retry`` name the task's own exception, which only the
    runner knows; here they fall back to ``Exception`` and ``Retry``.
    """
    return _KIND_CLASSES.get(kind, "builtins.Exception")


class BrokerUnavailable(TaskforgeError, ConnectionError):
    """Redis cannot be reached at the configured URL."""


class AppNotFound(TaskforgeError):
    """APP names no importable TaskForge app; ``details`` holds the user's own traceback if any."""

    def __init__(self, message: str, details: str | None = None) -> None:
        super().__init__(message)
        self.details = details


class BrokerStartError(TaskforgeError):
    """The development broker could not listen on the requested address."""


class MetricsPortUnavailable(TaskforgeError):
    """The metrics port could not be bound (in use, or not allowed)."""


class DashboardPortUnavailable(TaskforgeError):
    """The dashboard's address could not be bound (in use, or not an address of this host)."""


class TaskFailed(TaskforgeError):
    """The job ended dead (or cancelled); ``error`` and ``traceback`` come from the worker.

    ``kind`` is the ``FailureKind`` of the record (None when the record names
    none, e.g. a plain cancel): branch on it rather than on ``error``'s wording.
    ``error_type`` is the dotted path of the exception class the task raised
    (``"builtins.ValueError"``), or of the taskforge error that ended the job
    (``"taskforge.errors.HardTimeout"``): a class that imports, for code that
    ported ``except SomeError`` around Celery's ``.get()``.
    """

    def __init__(
        self,
        job_id: str,
        state: str,
        error: str | None,
        traceback: str | None,
        kind: FailureKind | None = None,
        task: str | None = None,
        error_type: str | None = None,
    ):
        self.job_id = job_id
        self.state = state
        self.error = error
        self.traceback = traceback
        self.kind = kind
        self.task = task  # the task of the step that ended a workflow; None for a plain job
        self.error_type = error_type  # "builtins.ValueError": the class path of the remote error
        detail = error or state
        what = f"job {job_id}" if task is None else f"step {task} (job {job_id})"
        super().__init__(f"{what} ended {state}: {detail}")


class Retry(Exception):  # noqa: N818 - the documented name (Celery's too), raised by user code
    """Raised by a task to be run again after ``after`` seconds.

    Counts as an attempt, so a task that always asks for a retry still ends
    dead after ``max_attempts`` runs instead of looping forever. ``exc``, the
    error that made the task ask (Celery's ``self.retry(exc=err)``), is what
    the attempt records: its message, class path and traceback.
    """

    def __init__(self, after: float | None = None, reason: str | None = None, exc: BaseException | None = None):
        if after is not None and after < 0:
            raise ConfigurationError(f"Retry(after={after!r}): after must be >= 0 seconds")
        if exc is not None and not isinstance(exc, BaseException):
            raise ConfigurationError(f"Retry(exc={exc!r}): use the exception the task caught")
        self.after = after
        self.reason = reason
        self.exc = exc
        super().__init__(reason or (f"retry requested after {after} s" if after else "retry"))


_KIND_CLASSES = {
    "retry": class_path(Retry),
    "timeout": class_path(HardTimeout),
    "crashed": class_path(WorkerCrashed),
    "worker_lost": class_path(WorkerLost),
    "unknown_task": class_path(UnknownTask),
    "serialization": class_path(SerializationError),
    "corrupt": class_path(CorruptJob),
    "aborted": class_path(Aborted),
    "expired": class_path(Expired),
    "interrupted": class_path(Interrupted),
}
