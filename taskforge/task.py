"""``Task``: a function registered with an app, callable inline or as a queued job."""

from __future__ import annotations

import hashlib
import inspect
from collections.abc import Callable, Iterable, Mapping
from contextlib import AbstractContextManager
from dataclasses import replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Generic, Literal, NoReturn, ParamSpec, TypeVar

from . import celery_names, other_names
from .bounds import is_real_number
from .building import build_job
from .call_arguments import celery_call, delay_ms, dramatiq_call, due_ms, validate_job_id
from .decorator_options import PER_CALL, Keep, for_call
from .depending import DependsOn, Parents, aenqueue_after, enqueue_after
from .errors import ConfigurationError, SerializationError
from .handle import JobHandle, async_access
from .job import BackoffPolicy, Priority, backoff_policy
from .named_limits import check_queue
from .sending import Outgoing, announce, sending
from .task_options import TaskOptions, check_key_parameter, parse_rate_limit, validate_call_key

__all__ = ["Task", "TaskOptions", "is_real_number", "parse_rate_limit"]

if TYPE_CHECKING:
    from .broker.record import NewJob
    from .protocols import Producer
    from .workflows.canvas import Signature

P = ParamSpec("P")
R = TypeVar("R")

# What ``send_with_options`` hands to ``with_options``: its per-call options, then the call's own.
SEND_TAKEN = frozenset((*PER_CALL, "job_id", "key"))


class Task(Generic[P, R]):
    """A registered task. Call it to run now; ``delay()`` to queue it for a worker.

    ``app`` is what the task queues through: a ``TaskForge``, or anything
    with its broker, its size limits and its ``after_enqueue`` callbacks (the
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
        params = self._signature.parameters.values() if self._signature else ()
        self._var_keyword = next((p.name for p in params if p.kind is inspect.Parameter.VAR_KEYWORD), None)
        check_key_parameter(name, options.key, self._signature)

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

    def check_call_options(self, kwargs: Mapping[str, Any]) -> None:
        """TypeError, before serializing, for RQ's call options (``depends_on=``...) the function has no
        parameter for: the error names the taskforge way, not a handle that cannot be serialized."""
        other_names.refuse_call_options(self.name, self._signature, kwargs)

    def bound_call(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any] | None:
        """The call's arguments by parameter name, defaults filled in (None: no signature to bind to)."""
        if self._signature is None:
            return None
        bound = self._signature.bind(*args, **kwargs)
        bound.apply_defaults()
        return {**bound.arguments, **bound.arguments.get(self._var_keyword or "", {})}

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
        """Queue a run for ``when`` (a naive datetime is in the app's time zone; a past time means now)."""
        return self._enqueue_one(args, kwargs, due_ms=due_ms(when, self.app.zone, f"{self.name}.apply_at()"))

    def apply_in(self, delay: timedelta | float, /, *args: P.args, **kwargs: P.kwargs) -> JobHandle[R]:
        """Queue a run after ``delay`` (a timedelta or seconds), timed by Redis's clock."""
        return self._enqueue_one(args, kwargs, delay_ms=delay_ms(delay))

    def apply_async(
        self,
        args: tuple[Any, ...] | list[Any] | None = None,
        kwargs: Mapping[str, Any] | None = None,
        countdown: timedelta | float | None = None,
        eta: datetime | None = None,
        queue: str | None = None,
        priority: Priority | str | int | None = None,
        task_id: str | None = None,
        depends_on: DependsOn | None = None,
        allow_failure: bool = False,
        **celery_options: NoReturn,
    ) -> JobHandle[R]:
        """Celery's spelling of ``delay()`` with options, for code being ported.

        ``countdown`` is ``apply_in``, ``eta`` is ``apply_at``, ``task_id`` is
        ``with_options(job_id=)``, ``queue`` and ``priority`` are
        ``with_options``'s (``priority`` is a taskforge ``Priority``: low,
        normal, high, critical). Any other Celery option raises ``TypeError``
        naming the taskforge way, so nothing is silently ignored. ``depends_on``: see ``depending.py``.
        """
        call_args, call_kwargs, timing = celery_call(
            self.name, args, kwargs, countdown, eta, celery_options, self.app.zone
        )
        task = self._celery_task(queue, priority, task_id)
        if depends_on is None:
            return task._enqueue_one(call_args, call_kwargs, **timing)
        return enqueue_after(task, Parents.of(self.name, depends_on, allow_failure, timing), call_args, call_kwargs)

    async def aapply_async(
        self,
        args: tuple[Any, ...] | list[Any] | None = None,
        kwargs: Mapping[str, Any] | None = None,
        countdown: timedelta | float | None = None,
        eta: datetime | None = None,
        queue: str | None = None,
        priority: Priority | str | int | None = None,
        task_id: str | None = None,
        depends_on: DependsOn | None = None,
        allow_failure: bool = False,
        **celery_options: NoReturn,
    ) -> JobHandle[R]:
        """``apply_async()``, awaited: never blocks the event loop (every task has it, as it has ``adelay``)."""
        call_args, call_kwargs, timing = celery_call(
            self.name, args, kwargs, countdown, eta, celery_options, self.app.zone
        )
        task = self._celery_task(queue, priority, task_id)
        if depends_on is None:
            return await task._aenqueue_one(call_args, call_kwargs, **timing)
        return await aenqueue_after(
            task, Parents.of(self.name, depends_on, allow_failure, timing), call_args, call_kwargs
        )

    def send(self, *args: P.args, **kwargs: P.kwargs) -> JobHandle[R]:
        """Dramatiq's spelling of ``delay()``: the same job, for code being ported."""
        return self.delay(*args, **kwargs)

    async def asend(self, *args: P.args, **kwargs: P.kwargs) -> JobHandle[R]:
        """``send()``, awaited: ``adelay()``."""
        return await self.adelay(*args, **kwargs)

    def send_with_options(
        self, *, args: Any = None, kwargs: Any = None, delay: timedelta | float | None = None, **options: Any
    ) -> JobHandle[R]:
        """Dramatiq's ``send_with_options``: ``delay`` is milliseconds (``apply_in``), and the options
        ``with_options`` takes (``queue=``, ``priority=``, ``max_attempts=``, ``timeout=``, ``expires=``,
        ``job_id=``...) apply to this job; Dramatiq's others raise ``TypeError`` naming the taskforge way."""
        call_args, call_kwargs, timing = dramatiq_call(self.name, args, kwargs, delay, options, SEND_TAKEN)
        return self._optioned(options)._enqueue_one(call_args, call_kwargs, **timing)

    async def asend_with_options(
        self, *, args: Any = None, kwargs: Any = None, delay: timedelta | float | None = None, **options: Any
    ) -> JobHandle[R]:
        """``send_with_options()``, awaited."""
        call_args, call_kwargs, timing = dramatiq_call(self.name, args, kwargs, delay, options, SEND_TAKEN)
        return await self._optioned(options)._aenqueue_one(call_args, call_kwargs, **timing)

    def _optioned(self, options: dict[str, Any]) -> Task[P, R]:
        return self.with_options(**options) if options else self

    def _celery_task(self, queue: str | None, priority: Priority | str | int | None, task_id: str | None) -> Task[P, R]:
        """This task, or a copy with ``apply_async``'s queue, priority and id."""
        if queue is None and priority is None and task_id is None:
            return self
        return self.with_options(queue=queue, priority=priority, job_id=task_id)

    def with_options(
        self,
        *,
        queue: str | None = None,
        priority: Priority | str | int | None = None,
        max_attempts: int | None = None,
        max_worker_losses: int | None = None,
        timeout: float | None | Literal[Keep.KEEP] = Keep.KEEP,
        retry_on: type[BaseException] | tuple[type[BaseException], ...] | None = None,
        dont_retry_on: type[BaseException] | tuple[type[BaseException], ...] | None = None,
        expires: float | timedelta | datetime | None = None,
        job_id: str | None = None,
        key: str | None = None,
    ) -> Task[P, R]:
        """A copy of this task whose jobs use other options; the registry is unchanged.

        ``timeout=None`` means "no timeout" (as in ``@app.task``), so leaving the
        task's own timeout is told apart by a default of its own. ``job_id``
        names the job the copy's next ``delay()`` stores: while a job with that
        id exists in the queue, nothing is stored and its handle comes back.
        The options are those declared ``per_call`` in ``decorator_options.py``
        (checked there), then the call's own ``job_id`` and ``key``.
        """
        arguments = locals()  # the per-call options are named once here, in the signature
        given = {name: arguments[name] for name in PER_CALL}
        changes, explicit = for_call(given)
        if job_id is not None:
            changes["job_id"] = validate_job_id(job_id)
        if key is not None:
            changes["call_key"] = validate_call_key(key)
        clone: Task[P, R] = Task.__new__(Task)
        clone.__dict__.update(self.__dict__)
        clone.options = replace(self.options, **changes) if changes else self.options
        check_queue(self.options, clone.options.queue)
        if explicit:
            clone.registered = True  # explicit options win over the worker's definition
        return clone

    def delay_on_commit(self, *args: P.args, **kwargs: P.kwargs) -> None:
        """``delay()`` once the current Django database transaction commits; never if it rolls back.

        The call is checked and serialized now, so a bad argument raises here,
        inside the transaction, rather than after the commit where nobody
        would see it. Outside a transaction (autocommit) it is stored at once.
        Returns None: the job does not exist until the commit, as with
        Celery's ``delay_on_commit``. Needs Django (``taskforge[django]``).
        """
        try:
            from django.db import transaction
        except ImportError:
            raise ConfigurationError(
                f"{self.name}.delay_on_commit() needs Django: pip install 'taskforge-redis[django]'"
            ) from None
        job = build_job(self, args, kwargs)
        transaction.on_commit(lambda: self._store_later(job))

    def _store_later(self, job: NewJob) -> None:
        [job_id] = self._store([job], resend=self.options.job_id is not None)
        self._stored(job_id)

    def delay_many(self, calls: Iterable[tuple[Any, ...] | Mapping[str, Any]]) -> list[JobHandle[R]]:
        """Queue many runs in one round trip; a tuple is args, a dict is kwargs.

        All or nothing: every call is serialized before anything is sent, and
        the enqueue script stores all of them or none (``QueueFull``).
        """
        jobs = self._jobs_of(calls)
        if not jobs:
            return []
        ids = self._store(jobs, resend=False, operation="send_many")
        return [JobHandle(self.app, job_id, self.queue) for job_id in ids]

    def _store(self, jobs: list[NewJob], *, resend: bool, operation: str = "send") -> list[str]:
        if not self.app.send_hooks:  # the plain path: no hook, nothing to wrap
            return self.app.broker.jobs.enqueue(self.queue, jobs, self.app.max_size, resend=resend)
        with self._sending(jobs, operation) as stamped:
            return self.app.broker.jobs.enqueue(self.queue, stamped, self.app.max_size, resend=resend)

    async def _astore(self, jobs: list[NewJob], *, resend: bool, operation: str = "send") -> list[str]:
        broker = async_access(self.app).async_broker()
        if not self.app.send_hooks:
            return await broker.jobs.enqueue(self.queue, jobs, self.app.max_size, resend=resend)
        with self._sending(jobs, operation) as stamped:
            return await broker.jobs.enqueue(self.queue, stamped, self.app.max_size, resend=resend)

    def _sending(self, jobs: list[NewJob], operation: str) -> AbstractContextManager[list[NewJob]]:
        """The producer hooks around storing ``jobs``, which come back carrying their headers."""
        outgoing = Outgoing(operation, self.name, self.queue, tuple(job.id for job in jobs))
        return sending(self.app.send_hooks, outgoing, jobs, self)

    def _jobs_of(self, calls: Iterable[tuple[Any, ...] | Mapping[str, Any]]) -> list[NewJob]:
        if self.options.job_id is not None:
            raise ConfigurationError(
                f"{self.name}: delay_many() with job_id={self.options.job_id!r}: one id names one job; "
                "send each with with_options(job_id=...).delay()"
            )
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
        # resend: an id chosen by the caller and already stored is left alone, and comes back.
        [job_id] = self._store([job], resend=self.options.job_id is not None)
        return self._stored(job_id)

    def _stored(self, job_id: str) -> JobHandle[R]:
        """The handle of a job just stored, after the app's after_enqueue callbacks heard of it
        (eager mode drains here, when the testing kit installed it)."""
        handle: JobHandle[R] = JobHandle(self.app, job_id, self.queue)
        announce(self.app.after_enqueue, handle)
        return handle

    # -- the same, awaited: the same job, stored over redis.asyncio -----------

    async def adelay(self, *args: P.args, **kwargs: P.kwargs) -> JobHandle[R]:
        """``delay()``, awaited: never blocks the event loop."""
        return await self._aenqueue_one(args, kwargs)

    async def aapply_at(self, when: datetime, /, *args: P.args, **kwargs: P.kwargs) -> JobHandle[R]:
        """``apply_at()``, awaited."""
        return await self._aenqueue_one(args, kwargs, due_ms=due_ms(when, self.app.zone, f"{self.name}.aapply_at()"))

    async def aapply_in(self, delay: timedelta | float, /, *args: P.args, **kwargs: P.kwargs) -> JobHandle[R]:
        """``apply_in()``, awaited."""
        return await self._aenqueue_one(args, kwargs, delay_ms=delay_ms(delay))

    async def adelay_many(self, calls: Iterable[tuple[Any, ...] | Mapping[str, Any]]) -> list[JobHandle[R]]:
        """``delay_many()``, awaited: one round trip, all or nothing."""
        jobs = self._jobs_of(calls)
        if not jobs:
            return []
        ids = await self._astore(jobs, resend=False, operation="send_many")
        return [JobHandle(self.app, job_id, self.queue) for job_id in ids]

    async def _aenqueue_one(self, args: tuple[Any, ...], kwargs: dict[str, Any], **timing: Any) -> JobHandle[R]:
        job = build_job(self, args, kwargs, **timing)  # checked and serialized before any await
        [job_id] = await self._astore([job], resend=self.options.job_id is not None)
        return self._stored(job_id)

    if not TYPE_CHECKING:  # hidden from type checkers: a typo stays a static error

        def __getattr__(self, name: str) -> Any:
            """Only for names not found: Celery's (``retry``, ``update_state``...) name the taskforge way."""
            raise celery_names.attribute_error("Task", name, celery_names.TASK)


def _signature_of(func: Callable[..., Any]) -> inspect.Signature | None:
    """The signature calls are checked against, or None where Python cannot tell (some builtins)."""
    try:
        return inspect.signature(func)
    except (TypeError, ValueError):
        return None
