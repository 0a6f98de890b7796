"""Plain data about jobs: states, priorities, the record users inspect, backoff.

Nothing here does I/O, so the worker, the CLI and tests can share it freely.
"""

from __future__ import annotations

import enum
import math
import random
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from typing import Any

from .errors import ConfigurationError

BACKOFF_CAP_SECONDS = 3600.0


class JobState(str, enum.Enum):
    """Where a job is in its life; the values are what Redis stores."""

    PENDING = "pending"
    SCHEDULED = "scheduled"
    DEFERRED = "deferred"  # waits for the jobs it depends on (``apply_async(..., depends_on=...)``)
    RUNNING = "running"
    RETRYING = "retrying"
    SUCCEEDED = "succeeded"
    DEAD = "dead"
    CANCELLED = "cancelled"

    @property
    def finished(self) -> bool:
        return self in (JobState.SUCCEEDED, JobState.DEAD, JobState.CANCELLED)

    def __str__(self) -> str:
        return self.value


class FailureKind(str, enum.Enum):
    """Why a job's last attempt failed or why it was stopped: the record's ``failure`` field.

    The human wording stays in ``error``; this is the same reason as a value a
    program can branch on (alert on ``timeout``, page on ``worker_lost``) without
    parsing text. It is kept, like ``error``, when the job is retried, requeued
    or later succeeds: it describes the latest failure, not the final state.
    """

    EXCEPTION = "exception"  # the task raised
    RETRY = "retry"  # the task raised Retry: it asked to run again later
    TIMEOUT = "timeout"  # it ran past its timeout and its child was killed
    CRASHED = "crashed"  # the child process running it died (a signal, os._exit, out of memory)
    WORKER_LOST = "worker_lost"  # its lease expired: the whole worker died or lost Redis
    UNKNOWN_TASK = "unknown_task"  # the worker has no task of that name
    SERIALIZATION = "serialization"  # its return value cannot be stored (type or size)
    CORRUPT = "corrupt"  # its record cannot be run: junk attempts or state, a corrupt payload, no task name
    ABORTED = "aborted"  # JobHandle.abort() stopped it
    EXPIRED = "expired"  # not started by its ``expires`` time: cancelled unrun
    INTERRUPTED = "interrupted"  # a worker's shutdown cut its run short: back in line, no attempt used

    def __str__(self) -> str:
        return self.value

    @classmethod
    def decode(cls, raw: str | None) -> FailureKind | None:
        """The kind a stored value names; None for none, and for a value taskforge never writes."""
        try:
            return cls(raw) if raw else None
        except ValueError:
            return None


class Priority(enum.IntEnum):
    """Higher runs first; within one priority, first in, first out."""

    LOW = 0
    NORMAL = 1
    HIGH = 2
    CRITICAL = 3

    def __str__(self) -> str:
        # IntEnum prints as its number since Python 3.11; a priority reads better by name.
        return f"Priority.{self.name}"

    @classmethod
    def parse(cls, value: Priority | str | int) -> Priority:
        """Accept a member, its name in any case, or its number."""
        if isinstance(value, Priority):
            return value
        if isinstance(value, str):
            try:
                return cls[value.strip().upper()]
            except KeyError:
                pass
        elif isinstance(value, int) and not isinstance(value, bool):
            try:
                return cls(value)
            except ValueError:
                pass
        names = ", ".join(p.name.lower() for p in cls)
        raise ConfigurationError(f"unknown priority {value!r}; use one of: {names}")


BackoffPolicy = Callable[[int], float]


def backoff_policy(backoff: float | BackoffPolicy) -> BackoffPolicy:
    """Turn the ``backoff=`` task option into ``attempt -> seconds``.

    A number is the base of an exponential backoff with full jitter ("decorrelated"
    retries: many jobs failing together must not come back together and hammer
    the same dependency), doubling per attempt and capped at one hour.
    """
    if callable(backoff):
        return backoff
    number = isinstance(backoff, (int, float)) and not isinstance(backoff, bool)
    if not number or not math.isfinite(backoff) or not 0 <= backoff <= BACKOFF_CAP_SECONDS:
        raise ConfigurationError(
            f"backoff={backoff!r}: use a number of seconds from 0 to {BACKOFF_CAP_SECONDS:.0f} (the cap of every "
            "backoff), or a callable attempt -> seconds"
        )
    base = float(backoff)

    def exponential(attempt: int) -> float:
        # The exponent is bounded: 2 ** 10_000 is an int no float can hold, and 2 ** 40 seconds is past any cap.
        ceiling: float = min(BACKOFF_CAP_SECONDS, base * 2 ** min(40, max(0, attempt - 1)))
        return ceiling / 2 + random.uniform(0, ceiling / 2)

    return exponential


def ms_to_datetime(value: int | None) -> datetime | None:
    if value is None:
        return None
    try:
        return datetime.fromtimestamp(value / 1000, tz=timezone.utc)
    except (OverflowError, ValueError, OSError):  # float rounding at the edge of year 9999
        return datetime.max.replace(tzinfo=timezone.utc) if value > 0 else datetime.min.replace(tzinfo=timezone.utc)


@dataclass(frozen=True)
class JobInfo:
    """A snapshot of one job's record, as ``JobHandle.info()`` and ``taskforge job`` show it."""

    id: str
    task: str
    queue: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    priority: Priority
    state: JobState
    attempts: int
    max_attempts: int
    created_at: datetime | None
    scheduled_at: datetime | None
    started_at: datetime | None
    finished_at: datetime | None
    error: str | None = None
    traceback: str | None = None
    result: Any = None
    progress: float | None = None
    progress_message: str | None = None
    failure: FailureKind | None = None  # why the latest attempt failed; None if none ever did
    headers: dict[str, str] = field(default_factory=dict)  # set at enqueue by producer hooks (trace context)
    error_type: str | None = None  # "builtins.ValueError": the class path of the latest failure's error
    progress_meta: Any = None  # set_progress(..., meta=): any small msgpack-able value
    key: str | None = None  # the job's key (the task's key= option), None for a job without one
    held: str | None = None  # why a pending job waits (its queue paused, its key's limits reached); None: nothing
    steps: dict[str, Any] = field(default_factory=dict)  # each finished durable step's result, by name
    stream_length: int = 0  # how many items the job streamed (current_job().stream)
    losses: int = 0  # runs whose worker was lost under them (max_worker_losses); they use no attempt
    interrupted: int = 0  # runs a worker's shutdown cut short; they use no attempt

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly form with the field names of ``JobInfo`` (``job --json``)."""
        data = asdict(self)
        data["priority"] = self.priority.name.lower()
        data["state"] = self.state.value
        data["failure"] = self.failure.value if self.failure else None
        data["args"] = list(self.args)
        for name in ("created_at", "scheduled_at", "started_at", "finished_at"):
            value = data[name]
            data[name] = value.isoformat() if value else None
        return data
