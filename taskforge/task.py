"""``Task``: a function registered with an app, callable inline or as a queued job."""

from __future__ import annotations

import math
import numbers
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any, Generic, ParamSpec, TypeVar

from .broker.keys import validate_queue_name
from .broker.queue import NewJob
from .errors import ConfigurationError, SerializationError
from .handle import JobHandle
from .job import BackoffPolicy, Priority, backoff_policy
from .serialization import dumps_call

if TYPE_CHECKING:
    from .app import TaskForge

P = ParamSpec("P")
R = TypeVar("R")


@dataclass(frozen=True)
class TaskOptions:
    """What a job carries from its task's definition; validated once, at decoration."""

    queue: str = "default"
    priority: Priority = Priority.NORMAL
    max_attempts: int = 3
    timeout: float | None = None

    @classmethod
    def build(
        cls,
        queue: str = "default",
        priority: Priority | str | int = Priority.NORMAL,
        max_attempts: int = 3,
        timeout: float | None = None,
    ) -> TaskOptions:
        if isinstance(max_attempts, bool) or not isinstance(max_attempts, int) or max_attempts < 1:
            raise ConfigurationError(f"max_attempts={max_attempts!r}: use a whole number >= 1 (total runs)")
        if timeout is not None and (
            isinstance(timeout, bool)
            or not isinstance(timeout, numbers.Real)
            or not math.isfinite(timeout)
            or timeout <= 0
        ):
            raise ConfigurationError(f"timeout={timeout!r}: use a number of seconds > 0, or None")
        return cls(
            queue=validate_queue_name(queue),
            priority=Priority.parse(priority),
            max_attempts=max_attempts,
            timeout=None if timeout is None else float(timeout),
        )


def _due_ms(when: datetime) -> int:
    if not isinstance(when, datetime):
        raise ConfigurationError(f"apply_at() needs a datetime, got {type(when).__name__}: {when!r}")
    if when.tzinfo is None:  # SPEC: a naive datetime means UTC
        when = when.replace(tzinfo=timezone.utc)
    return int(when.timestamp() * 1000)


def _delay_ms(delay: timedelta | float) -> int:
    if isinstance(delay, timedelta):
        seconds = delay.total_seconds()
    elif isinstance(delay, numbers.Real) and not isinstance(delay, bool) and math.isfinite(delay):
        seconds = float(delay)
    else:
        raise ConfigurationError(f"apply_in() needs a timedelta or seconds, got {delay!r}")
    return max(0, int(seconds * 1000))


class Task(Generic[P, R]):
    """A registered task. Call it to run now; ``delay()`` to queue it for a worker."""

    def __init__(
        self,
        app: TaskForge,
        func: Callable[P, R],
        name: str,
        options: TaskOptions,
        backoff: float | BackoffPolicy = 1.0,
        registered: bool = True,
    ) -> None:
        self.registered = registered
        self.app = app
        self.func = func
        self.name = name
        self.options = options
        self.backoff = backoff_policy(backoff)
        self.__doc__ = func.__doc__
        self.__wrapped__ = func

    def __repr__(self) -> str:
        return f"<Task {self.name} queue={self.options.queue} priority={self.options.priority.name.lower()}>"

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.func(*args, **kwargs)

    @property
    def queue(self) -> str:
        return self.options.queue

    def delay(self, *args: P.args, **kwargs: P.kwargs) -> JobHandle[R]:
        """Queue a run of this task now; returns at once with a handle."""
        return self._enqueue_one(args, kwargs)

    def apply_at(self, when: datetime, /, *args: P.args, **kwargs: P.kwargs) -> JobHandle[R]:
        """Queue a run for ``when`` (naive means UTC; a past time means now)."""
        return self._enqueue_one(args, kwargs, due_ms=_due_ms(when))

    def apply_in(self, delay: timedelta | float, /, *args: P.args, **kwargs: P.kwargs) -> JobHandle[R]:
        """Queue a run after ``delay`` (a timedelta or seconds), timed by Redis's clock."""
        return self._enqueue_one(args, kwargs, delay_ms=_delay_ms(delay))

    def with_options(
        self,
        *,
        queue: str | None = None,
        priority: Priority | str | int | None = None,
        max_attempts: int | None = None,
        timeout: float | None = None,
    ) -> Task[P, R]:
        """A copy of this task whose jobs use other options; the registry is unchanged."""
        current = self.options
        options = TaskOptions.build(
            queue=current.queue if queue is None else queue,
            priority=current.priority if priority is None else priority,
            max_attempts=current.max_attempts if max_attempts is None else max_attempts,
            timeout=current.timeout if timeout is None else timeout,
        )
        clone: Task[P, R] = Task.__new__(Task)
        clone.__dict__.update(self.__dict__)
        clone.options = options
        if max_attempts is not None or timeout is not None:
            clone.registered = True  # explicit options win over the worker's definition
        return clone

    def delay_many(self, calls: Iterable[tuple[Any, ...] | Mapping[str, Any]]) -> list[JobHandle[R]]:
        """Queue many runs in one round trip; a tuple is args, a dict is kwargs.

        All or nothing: every call is serialized before anything is sent, and
        the enqueue script stores all of them or none (``QueueFull``).
        """
        jobs = []
        for index, call in enumerate(calls):
            if isinstance(call, tuple):
                args, kwargs = call, {}
            elif isinstance(call, Mapping):
                args, kwargs = (), dict(call)
            else:
                raise ConfigurationError(
                    f"delay_many() call #{index}: use a tuple of args or a dict of kwargs, "
                    f"got {type(call).__name__}: {call!r}"
                )
            try:
                jobs.append(self._new_job(args, kwargs))
            except SerializationError as exc:
                raise SerializationError(f"delay_many() call #{index}: {exc}; nothing was stored") from None
        if jobs:
            self.app.broker.enqueue(self.queue, jobs, self.app.max_size)
        return [JobHandle(self.app, job.id, self.queue) for job in jobs]

    def _new_job(self, args: tuple[Any, ...], kwargs: dict[str, Any], **timing: Any) -> NewJob:
        payload = dumps_call(args, kwargs)
        limit = self.app.max_job_size
        if limit and len(payload) > limit:
            raise SerializationError(
                f"the arguments of {self.name} serialize to {len(payload):,} bytes, over the "
                f"max_job_size of {limit:,}; pass a reference (a URL, a key) instead of the data"
            )
        opts = self.options
        return NewJob(
            id=uuid.uuid4().hex,
            task=self.name,
            payload=payload,
            priority=int(opts.priority),
            max_attempts=opts.max_attempts,
            timeout_ms=None if opts.timeout is None else int(opts.timeout * 1000),
            inherit=not self.registered,
            **timing,
        )

    def _enqueue_one(self, args: tuple[Any, ...], kwargs: dict[str, Any], **timing: Any) -> JobHandle[R]:
        job = self._new_job(args, kwargs, **timing)
        self.app.broker.enqueue(self.queue, [job], self.app.max_size)
        if self.app.eager:
            self.app.drain()
        return JobHandle(self.app, job.id, self.queue)



