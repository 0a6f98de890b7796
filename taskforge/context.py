"""``current_job()``: what a running task knows about its own job."""

from __future__ import annotations

import asyncio
import inspect
import math
import os
import socket
from collections.abc import Awaitable, Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any, TypeVar

from .errors import ConfigurationError, LeaseLost, SerializationError, TaskforgeError
from .job import ms_to_datetime
from .serialization import dumps, loads

if TYPE_CHECKING:
    from .broker.queue import Claim
    from .broker.roles import ClaimsRole, StepsRole

T = TypeVar("T")

PROGRESS_META_LIMIT = 64 * 1024  # bytes of msgpack: meta is for a few counters, not for results

_current: ContextVar[CurrentJob | None] = ContextVar("taskforge_current_job", default=None)
_worker = [""]  # the id of the worker this process is a child of (``set_worker``); "" outside a worker


def set_worker(worker_id: str) -> None:
    """Called once by a worker's child: ``current_job().worker_id`` then names its worker."""
    _worker[0] = worker_id


@dataclass(frozen=True)
class CurrentJob:
    """The job the calling task runs: its id, attempt (1 for the first run), headers and progress.

    ``attempt`` counts the runs that count against ``max_attempts``: a run
    lost with its worker or cut short by a shutdown used none, so the run
    after it has the same number.

    ``enqueued_at`` is when the job was stored (Redis's clock, as
    ``JobInfo.created_at``); ``started_at`` when this run started (the
    worker's clock, read as it began the run: a retry's is its own). Both
    are aware datetimes in UTC, as RQ's ``job.enqueued_at`` and
    ``job.started_at`` are; ``enqueued_at`` is None only for a record
    written without its time (by hand).
    """

    id: str
    attempt: int
    task: str
    queue: str
    _token: str
    _broker: ClaimsRole | None
    headers: Mapping[str, str] = field(default_factory=dict)  # set at enqueue by producer hooks
    _steps: StepsRole | None = None
    enqueued_at: datetime | None = None
    started_at: datetime = field(default_factory=lambda: datetime.now(timezone.utc))
    _seen: set[str] = field(default_factory=set)  # the step names this run reached
    _sleeps: list[int] = field(default_factory=lambda: [0])  # how many sleeps this run reached
    _streamed: list[int] = field(default_factory=lambda: [0])  # how many items this run streamed

    def sleep(self, duration: float | timedelta) -> None:
        """End this run and resume the job ``duration`` (seconds or a ``timedelta``) from now.

        The first time a run reaches this sleep the job becomes ``scheduled``
        for that time, without using an attempt or holding a worker; in later
        runs the same sleep (sleeps are told apart by their order in the run)
        returns at once, and the steps already finished are kept. Raises
        ``LeaseLost`` in a run that no longer holds the job.
        """
        seconds = duration.total_seconds() if isinstance(duration, timedelta) else duration
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not math.isfinite(seconds):
            raise ValueError(f"sleep({duration!r}): use seconds (a number) or a timedelta")
        if seconds < 0:
            raise ValueError(f"sleep({duration!r}): a sleep cannot be negative")
        self._sleep(0, max(0, int(seconds * 1000)))

    def sleep_until(self, when: datetime) -> None:
        """``sleep`` until ``when`` (a naive datetime means UTC, not the app's ``timezone=``: the durable steps'
        contract); a time past returns at once in later runs too."""
        if not isinstance(when, datetime):
            raise ValueError(f"sleep_until({when!r}): use a datetime")
        aware = when if when.tzinfo is not None else when.replace(tzinfo=timezone.utc)
        self._sleep(max(1, int(aware.timestamp() * 1000)), 0)

    async def asleep(self, duration: float | timedelta) -> None:
        """``sleep`` for async tasks (its Redis calls in a thread)."""
        await asyncio.to_thread(self.sleep, duration)

    def _sleep(self, due_ms: int, delay_ms: int) -> None:
        self._sleeps[0] += 1
        index = self._sleeps[0]
        if self._steps is None or self._steps.slept(self.queue, self.id, index):
            return
        if self._steps.sleep(self.queue, self.id, self._token, index, due_ms, delay_ms) < 0:
            raise LeaseLost(f"sleep: this run no longer holds job {self.id}; nothing was scheduled")
        raise Slept(index)

    def step(self, name: str, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)``, once per job: its result is kept with the job, and any
        later run of the job (a retry, a run after a crash) gets it back without calling ``fn``.

        Code between steps runs again in every run, so it must take the same
        path each time (``docs/howto/durable-steps.md`` has an example of
        what goes wrong otherwise). ``fn`` raising stores nothing
        and the run fails as usual. A name repeated within one run raises
        ``ValueError`` before ``fn`` is called; a result msgpack cannot carry
        raises ``SerializationError`` naming the step; a run that lost its
        lease raises ``LeaseLost``, storing nothing.
        """
        found = self._replayed(name)
        if found is _MISSING:
            found = fn(*args, **kwargs)
            self._keep(name, found)
        return found  # type: ignore[no-any-return]

    async def astep(self, name: str, fn: Callable[..., T | Awaitable[T]], /, *args: Any, **kwargs: Any) -> T:
        """``step`` for async tasks: ``fn`` may be a coroutine function; the reads and the write run
        in a thread, so the event loop is not held by Redis."""
        found = await asyncio.to_thread(self._replayed, name)
        if found is _MISSING:
            made = fn(*args, **kwargs)
            found = await made if inspect.isawaitable(made) else made
            await asyncio.to_thread(self._keep, name, found)
        return found  # type: ignore[no-any-return]

    def _replayed(self, name: str) -> Any:
        """The stored result of step ``name``, or _MISSING; marks the name as reached in this run."""
        if not isinstance(name, str) or not name:
            raise ValueError(f"step({name!r}, ...): a step's name is a non-empty string")
        if name in self._seen:
            raise ValueError(f"step {name!r} was already reached in this run: each step needs a name of its own")
        self._seen.add(name)
        if self._steps is None:
            return _MISSING
        stored = self._steps.stored(self.queue, self.id, name)
        return _MISSING if stored is None else loads(stored)

    def _keep(self, name: str, value: Any) -> None:
        try:
            packed = dumps(value)
        except SerializationError as exc:
            raise SerializationError(f"step {name!r}: its result cannot be stored: {exc}") from None
        if self._steps is not None and not self._steps.store(self.queue, self.id, self._token, name, packed):
            raise LeaseLost(
                f"step {name!r}: this run no longer holds job {self.id} (its lease ran out and another "
                "run has it, or will); the step's result is not stored"
            )

    def stream(self, value: Any) -> None:
        """Append ``value`` (msgpack-able) to the job's stream, for ``JobHandle.stream`` readers.

        Readers in any process see it at once. Never deduplicated: code that
        runs again (a retry, the run after a ``sleep``) streams again, unless
        the call is inside a ``step``. Raises ``SerializationError`` for a
        value msgpack cannot carry and ``LeaseLost`` in a run that no longer
        holds the job (nothing is written). In async tasks it is a quick
        Redis call, as ``set_progress`` is: it does not wait on readers.
        """
        try:
            packed = dumps(value)
        except SerializationError as exc:
            raise SerializationError(f"stream: the item cannot be stored: {exc}") from None
        self._streamed[0] += 1
        index = self._streamed[0]
        if self._steps is not None and not self._steps.append(self.queue, self.id, self._token, packed, index):
            raise LeaseLost(f"stream: this run no longer holds job {self.id}; the item is not stored")

    def set_progress(self, fraction: float, message: str | None = None, meta: Any = None) -> None:
        """Record progress (0.0 to 1.0) for ``info()``, ``taskforge job`` and status.

        ``meta`` is any small msgpack-able value (``{"done": 3, "total": 10}``,
        what Celery's ``update_state(meta=...)`` carried), kept in
        ``JobInfo.progress_meta`` until the next call replaces it; it is
        checked here, so a value that cannot be stored raises
        ``SerializationError`` in the task, not somewhere later.

        Fenced like every write of a worker: a run whose claim was reclaimed
        cannot overwrite the progress of the run that replaced it.
        """
        if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not math.isfinite(fraction):
            raise ConfigurationError(f"set_progress({fraction!r}): use a number from 0.0 to 1.0")
        packed = b""
        if meta is not None:
            try:
                packed = dumps(meta)
            except SerializationError as exc:
                raise SerializationError(f"set_progress(meta=...): {exc}") from None
            if len(packed) > PROGRESS_META_LIMIT:
                raise SerializationError(
                    f"set_progress(meta=...): {len(packed):,} bytes of msgpack, over the {PROGRESS_META_LIMIT:,} "
                    "a progress meta may take; keep a few counters here and return the rest as the result"
                )
        if self._broker is not None:
            fraction = min(1.0, max(0.0, float(fraction)))
            self._broker.progress(self.queue, self.id, self._token, fraction, message, packed)

    @property
    def worker_id(self) -> str:
        """The id of the worker running this job as ``taskforge status`` lists it (``host:pid:xxxx``);
        outside a worker (``app.drain()``, eager) the host and pid of the calling process."""
        return _worker[0] or f"{socket.gethostname()}:{os.getpid()}"

    if not TYPE_CHECKING:  # hidden from type checkers: a typo stays a static error

        def __getattr__(self, name: str) -> Any:
            """Only for names not found: a bound Celery task's ``self.retry``... name the taskforge way."""
            from . import celery_names

            raise celery_names.attribute_error("CurrentJob", name, celery_names.TASK)


_MISSING = object()


class Slept(BaseException):
    """Ends a run that reached a durable sleep: the job is already scheduled again (``sleep_job.lua``).

    A ``BaseException``, so the task's own ``except Exception`` does not catch
    it; the worker records nothing more for the run.
    """


def current_job() -> CurrentJob:
    """The job being run by the calling task; raises outside a task run by a worker."""
    job = _current.get()
    if job is None:
        raise TaskforgeError("current_job() is only available inside a task run by a worker (or app.drain())")
    return job


def running() -> CurrentJob | None:
    """The job the caller runs, or None outside a task: ``current_job()`` that does not raise."""
    return _current.get()


def enter(claim: Claim, broker: ClaimsRole | None, steps: StepsRole | None = None) -> object:
    """Make ``claim`` the calling context's ``current_job()``; its run starts now (``started_at``)."""
    headers = claim.headers or {}
    enqueued = ms_to_datetime(claim.created_at)
    job = CurrentJob(claim.id, claim.attempts, claim.task, claim.queue, claim.token, broker, headers, steps, enqueued)
    return _current.set(job)


def leave(token: object) -> None:
    _current.reset(token)  # type: ignore[arg-type]
