"""``Task``: a function registered with an app, callable inline or as a queued job."""

from __future__ import annotations

import enum
import hashlib
import inspect
import math
import numbers
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any, Generic, Literal, ParamSpec, TypeVar

from .broker.keys import validate_queue_name
from .errors import ConfigurationError, SerializationError
from .handle import JobHandle, async_access
from .job import BackoffPolicy, Priority, backoff_policy
from .new_job import build_job

if TYPE_CHECKING:
    from .broker.record import NewJob
    from .protocols import Producer
    from .workflows.canvas import Signature

P = ParamSpec("P")
R = TypeVar("R")


UNIQUE_DEFAULT_TTL = 24 * 3600.0
MAX_DELAY_SECONDS = 100 * 365.25 * 86400
_RATE = re.compile(r"^\s*(\d+)\s*/\s*(\d*)\s*(s|sec|second|m|min|minute|h|hour|d|day)s?\s*$", re.IGNORECASE)
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_rate_limit(value: str) -> tuple[int, float]:
    """``"100/m"`` -> (100, 60.0): at most 100 starts in any 60-second window."""
    match = _RATE.match(value) if isinstance(value, str) else None
    if not match or int(match[1]) < 1:
        raise ConfigurationError(
            f"rate_limit={value!r}: use 'N/unit' with N >= 1 and unit s, m, h or d (e.g. '100/m', '5/10s')"
        )
    return int(match[1]), float(match[2] or 1) * _UNIT_SECONDS[match[3][0].lower()]


def is_real_number(value: object) -> bool:
    """A finite int, float or other ``numbers.Real``, and not a bool: what a seconds option accepts.

    Takes ``object`` because the options are checked at run time, for callers
    whose code no type checker has seen (a ``"30"`` from a config file).
    """
    return not isinstance(value, bool) and isinstance(value, numbers.Real) and math.isfinite(value)


class _Keep(enum.Enum):
    """The default of an option whose None has a meaning of its own."""

    KEEP = 0


@dataclass(frozen=True)
class TaskOptions:
    """What a job carries from its task's definition; validated once, at decoration."""

    queue: str = "default"
    priority: Priority = Priority.NORMAL
    max_attempts: int = 3
    timeout: float | None = None
    unique_for: float | None = None  # None: not unique
    unique_key: Callable[..., Any] | None = None
    rate_limit: tuple[int, float] | None = None
    concurrency: int = 0

    @property
    def limits(self) -> str:
        """The limits as the enqueue script stores them ('' when unlimited)."""
        if self.rate_limit is None and not self.concurrency:
            return ""
        rate, period = self.rate_limit or (0, 1.0)
        return f"{rate}:{int(period * 1000)}:{self.concurrency}"

    @classmethod
    def build(
        cls,
        queue: str = "default",
        priority: Priority | str | int = Priority.NORMAL,
        max_attempts: int = 3,
        timeout: float | None = None,
        unique: bool = False,
        unique_for: float | None = None,
        unique_key: Callable[..., Any] | None = None,
        rate_limit: str | None = None,
        concurrency: int | None = None,
    ) -> TaskOptions:
        if isinstance(max_attempts, bool) or not isinstance(max_attempts, int) or max_attempts < 1:
            raise ConfigurationError(f"max_attempts={max_attempts!r}: use a whole number >= 1 (total runs)")
        if timeout is not None and (not is_real_number(timeout) or timeout <= 0):
            raise ConfigurationError(f"timeout={timeout!r}: use a number of seconds > 0, or None")
        if unique_for is not None and (not is_real_number(unique_for) or unique_for <= 0):
            raise ConfigurationError(f"unique_for={unique_for!r}: use a number of seconds > 0")
        if unique_key is not None and not callable(unique_key):
            raise ConfigurationError(f"unique_key={unique_key!r}: use a callable taking the task's arguments")
        if concurrency is not None and (
            isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1
        ):
            raise ConfigurationError(f"concurrency={concurrency!r}: use a whole number >= 1")
        is_unique = bool(unique) or unique_for is not None or unique_key is not None
        return cls(
            queue=validate_queue_name(queue),
            priority=Priority.parse(priority),
            max_attempts=max_attempts,
            timeout=None if timeout is None else float(timeout),
            unique_for=(float(unique_for) if unique_for else UNIQUE_DEFAULT_TTL) if is_unique else None,
            unique_key=unique_key,
            rate_limit=None if rate_limit is None else parse_rate_limit(rate_limit),
            concurrency=concurrency or 0,
        )


def _due_ms(when: datetime) -> int:
    if not isinstance(when, datetime):
        raise ConfigurationError(f"apply_at() needs a datetime, got {type(when).__name__}: {when!r}")
    if when.tzinfo is None:  # SPEC: a naive datetime means UTC
        when = when.replace(tzinfo=timezone.utc)
    try:
        return int(when.timestamp() * 1000)
    except (OverflowError, ValueError):
        raise ConfigurationError(f"apply_at({when!r}): that time cannot be represented; use an earlier one") from None


def _delay_ms(delay: timedelta | float) -> int:
    if isinstance(delay, timedelta):
        seconds = delay.total_seconds()
    elif is_real_number(delay):
        seconds = float(delay)
    else:
        raise ConfigurationError(f"apply_in() needs a timedelta or seconds, got {delay!r}")
    if seconds > MAX_DELAY_SECONDS:
        raise ConfigurationError(f"apply_in({delay!r}): more than {MAX_DELAY_SECONDS:.0f} s (~100 years) away")
    return max(0, int(seconds * 1000))


class Task(Generic[P, R]):
    """A registered task. Call it to run now; ``delay()`` to queue it for a worker.

    ``app`` is what the task queues through: a ``TaskForge``, or anything
    with its broker, its size limits and an ``enqueued`` callback (the
    ``Producer`` protocol); a task never runs jobs itself.
    """

    def __init__(
        self,
        app: Producer,
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
        self._signature = _signature_of(func)

    def __repr__(self) -> str:
        return f"<Task {self.name} queue={self.options.queue} priority={self.options.priority.name.lower()}>"

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.func(*args, **kwargs)

    @property
    def queue(self) -> str:
        return self.options.queue

    def check_call(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """TypeError, before anything is stored, for arguments the function cannot take.

        Otherwise the mistake would surface in a worker, as a TypeError run
        after run until the job's attempts are spent. (A job sent by name has
        no function here to check against.)
        """
        if self._signature is None:
            return
        try:
            self._signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise TypeError(f"{self.name}: {exc}; the job was not queued") from None

    def s(self, *args: Any, **kwargs: Any) -> Signature[R]:
        """A call of this task not yet sent, for ``chain()`` and ``group()``; in a chain the
        previous step's result is put before ``args``."""
        from .workflows.canvas import Signature

        return Signature(self, args, kwargs)

    def si(self, *args: Any, **kwargs: Any) -> Signature[R]:
        """Like ``s()``, but immutable: the previous step's result is not passed."""
        from .workflows.canvas import Signature

        return Signature(self, args, kwargs, immutable=True)

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
        timeout: float | None | Literal[_Keep.KEEP] = _Keep.KEEP,
    ) -> Task[P, R]:
        """A copy of this task whose jobs use other options; the registry is unchanged.

        ``timeout=None`` means "no timeout" (as in ``@app.task``), so leaving the
        task's own timeout is told apart by a default of its own.
        """
        current = self.options
        options = replace(
            current,
            queue=current.queue if queue is None else validate_queue_name(queue),
            priority=current.priority if priority is None else Priority.parse(priority),
        )
        keep_timeout = timeout is _Keep.KEEP
        if max_attempts is not None or not keep_timeout:
            checked = TaskOptions.build(
                max_attempts=current.max_attempts if max_attempts is None else max_attempts,
                timeout=current.timeout if timeout is _Keep.KEEP else timeout,
            )
            options = replace(options, max_attempts=checked.max_attempts, timeout=checked.timeout)
        clone: Task[P, R] = Task.__new__(Task)
        clone.__dict__.update(self.__dict__)
        clone.options = options
        if max_attempts is not None or not keep_timeout:
            clone.registered = True  # explicit options win over the worker's definition
        return clone

    def delay_many(self, calls: Iterable[tuple[Any, ...] | Mapping[str, Any]]) -> list[JobHandle[R]]:
        """Queue many runs in one round trip; a tuple is args, a dict is kwargs.

        All or nothing: every call is serialized before anything is sent, and
        the enqueue script stores all of them or none (``QueueFull``).
        """
        jobs = self._jobs_of(calls)
        if not jobs:
            return []
        ids = self.app.broker.enqueue(self.queue, jobs, self.app.max_size)
        return [JobHandle(self.app, job_id, self.queue) for job_id in ids]

    def _jobs_of(self, calls: Iterable[tuple[Any, ...] | Mapping[str, Any]]) -> list[NewJob]:
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
                jobs.append(build_job(self, args, kwargs))
            except SerializationError as exc:
                raise SerializationError(f"delay_many() call #{index}: {exc}; nothing was stored") from None
        return jobs

    def unique_lock(self, args: tuple[Any, ...], kwargs: dict[str, Any], payload: bytes) -> str:
        """The digest naming a unique job's lock: its task and arguments (or unique_key's answer)."""
        custom = self.options.unique_key
        material = str(custom(*args, **kwargs)).encode() if custom is not None else payload
        return hashlib.sha1(self.name.encode() + b"\0" + material).hexdigest()

    def _enqueue_one(self, args: tuple[Any, ...], kwargs: dict[str, Any], **timing: Any) -> JobHandle[R]:
        job = build_job(self, args, kwargs, **timing)
        [job_id] = self.app.broker.enqueue(self.queue, [job], self.app.max_size)
        handle: JobHandle[R] = JobHandle(self.app, job_id, self.queue)
        self.app.enqueued(handle)  # eager mode drains here, when the testing kit installed it
        return handle

    # -- the same, awaited: the same job, stored over redis.asyncio -----------

    async def adelay(self, *args: P.args, **kwargs: P.kwargs) -> JobHandle[R]:
        """``delay()``, awaited: never blocks the event loop."""
        return await self._aenqueue_one(args, kwargs)

    async def aapply_at(self, when: datetime, /, *args: P.args, **kwargs: P.kwargs) -> JobHandle[R]:
        """``apply_at()``, awaited."""
        return await self._aenqueue_one(args, kwargs, due_ms=_due_ms(when))

    async def aapply_in(self, delay: timedelta | float, /, *args: P.args, **kwargs: P.kwargs) -> JobHandle[R]:
        """``apply_in()``, awaited."""
        return await self._aenqueue_one(args, kwargs, delay_ms=_delay_ms(delay))

    async def adelay_many(self, calls: Iterable[tuple[Any, ...] | Mapping[str, Any]]) -> list[JobHandle[R]]:
        """``delay_many()``, awaited: one round trip, all or nothing."""
        jobs = self._jobs_of(calls)
        if not jobs:
            return []
        ids = await async_access(self.app).async_broker().enqueue(self.queue, jobs, self.app.max_size)
        return [JobHandle(self.app, job_id, self.queue) for job_id in ids]

    async def _aenqueue_one(self, args: tuple[Any, ...], kwargs: dict[str, Any], **timing: Any) -> JobHandle[R]:
        job = build_job(self, args, kwargs, **timing)  # checked and serialized before any await
        [job_id] = await async_access(self.app).async_broker().enqueue(self.queue, [job], self.app.max_size)
        handle: JobHandle[R] = JobHandle(self.app, job_id, self.queue)
        self.app.enqueued(handle)
        return handle


def _signature_of(func: Callable[..., Any]) -> inspect.Signature | None:
    """The signature calls are checked against, or None where Python cannot tell (some builtins)."""
    try:
        return inspect.signature(func)
    except (TypeError, ValueError):
        return None
