"""``TaskForge``: configuration, the task registry, and the way in for producers."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta, tzinfo
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar, overload

from . import celery_names
from .bounds import checked_count, checked_seconds
from .broker import Broker
from .broker.aio_loops import LoopBrokers
from .broker.cleanup import RetentionCounts
from .broker.connection import connect, redact, resolve_url
from .celery_names import reject_options
from .decorator_options import OPTION_NAMES, DecoratorOptions
from .decorator_options import build as build_options
from .errors import ConfigurationError
from .finals import Finals
from .handle import JobHandle, aknown_queues, find_queue, in_event_loop, known_queues
from .hooks import Event, Hooks, Middleware
from .import_names import module_name, module_names
from .job import BackoffPolicy, JobInfo, JobState, Priority
from .named_limits import NamedLimits
from .periodic import Schedule
from .queue_handle import QueueHandle
from .search import JobPage, find_jobs, query
from .sending import SendHook, check_hook
from .stacking import refuse_stacked
from .task import Task, TaskOptions
from .workflows.reports import install as listen_for_steps
from .zones import AppZone

if TYPE_CHECKING:
    from .broker.aio import AsyncBroker
    from .workflows.handle import WorkflowHandle

P = ParamSpec("P")
R = TypeVar("R")

DEFAULT_MAX_JOB_SIZE = 16 * 1024 * 1024
DURABILITY = ("async", "replicated")


def _seconds(name: str, value: timedelta | float) -> float:
    seconds = value.total_seconds() if isinstance(value, timedelta) else value
    return checked_seconds(name, seconds, ", or a timedelta")


class TaskForge:
    """A task application: owns its broker connection, its tasks and its settings.

    Nothing is global: two apps in one process never share state. The
    connection opens lazily, on first use, so importing a module that creates
    an app never touches the network.
    """

    def __init__(
        self,
        name: str = "taskforge",
        broker: str | None = None,
        *,
        max_size: int = 0,
        retention: timedelta | float = timedelta(days=1),
        dead_retention: timedelta | float = timedelta(days=7),
        retention_count: int | Mapping[str, int] = 0,
        durability: str = "async",
        max_job_size: int = DEFAULT_MAX_JOB_SIZE,
        include: Sequence[str] = (),
        timezone: str | tzinfo | None = None,
    ) -> None:
        checked_count("max_size", max_size, 0, " (0: unbounded)")
        checked_count("max_job_size", max_job_size, 0, " bytes (0: no limit)")
        if durability not in DURABILITY:
            raise ConfigurationError(f"durability={durability!r}: use one of {', '.join(DURABILITY)}")
        self.name = name
        # Modules a worker imports at start (Celery's include=): where the tasks are defined.
        self.include = module_names(include)
        self.url = resolve_url(broker)
        self.max_size = max_size
        self.max_job_size = max_job_size
        self.retention = _seconds("retention", retention)
        self.dead_retention = _seconds("dead_retention", dead_retention)
        # At most this many finished records per queue (BullMQ's removeOnComplete: {count}); a mapping: per queue.
        self.retention_count = RetentionCounts.of(retention_count)
        self.durability = durability
        # Where a naive apply_at() time is read (zones.py): zone.tzinfo, UTC unless given (with a warning then).
        self.zone = AppZone.of(timezone)
        self.tasks: dict[str, Task[Any, Any]] = {}
        self.named_limits = NamedLimits()  # app.limit's, and the queue each is held in
        self.hooks = Hooks()
        self.finals = Finals()  # told of each final transition (finals.py): workflows carry a step's report on
        listen_for_steps(self.finals)
        self.send_hooks: list[SendHook] = []  # producer hooks, around every enqueue (see taskforge.sending)
        self.schedules: list[Schedule] = []
        # Called with the handle of each job delay(), apply_at(), apply_in() or send() stored
        # (the testing kit's eager mode is one: taskforge.testing.set_eager).
        self.after_enqueue: list[Callable[[JobHandle[Any]], object]] = []
        self._broker: Broker | None = None
        # One async broker (one pool) per live event loop, closed when its loop ends (aio_loops.py).
        self._async_brokers = LoopBrokers()

    def __repr__(self) -> str:
        return f"<TaskForge {self.name} broker={redact(self.url)} tasks={len(self.tasks)}>"

    def __setattr__(self, name: str, value: Any) -> None:
        """Every attribute as usual, but ``eager`` and Huey's ``immediate``: setting them would do nothing."""
        if name in ("eager", "immediate"):  # Huey's switch is app.immediate
            raise AttributeError(
                f"app.{name} is not a switch: eager mode is the testing kit's switch, "
                "taskforge.testing.set_eager(app, True) (or the fixture's taskforge_app(app, eager=True))"
            )
        super().__setattr__(name, value)

    @property
    def broker(self) -> Broker:
        """The queue operations on this app's Redis, connected on first use."""
        if self._broker is None:
            self._broker = Broker(
                connect(self.url),
                self.url,
                retention_ms=int(self.retention * 1000),
                dead_retention_ms=int(self.dead_retention * 1000),
                durability=self.durability,
            )
            self._broker.link.retention_count.update(self.retention_count)
        return self._broker

    def async_broker(self) -> AsyncBroker:
        """The queue operations over redis.asyncio for the running loop, made on first use (sending nothing).

        On ``memory://`` it shares the sync broker's in-process server: ``app.drain()`` runs what ``adelay()`` stored.
        """
        return self._async_brokers.get(self._open_async_broker)

    def _open_async_broker(self) -> AsyncBroker:
        from .broker.aio import AsyncBroker

        url = self._broker.url if self._broker is not None else self.url
        memory = self.broker.client if url.startswith("memory:") else None
        retention_ms, dead_ms = int(self.retention * 1000), int(self.dead_retention * 1000)
        return AsyncBroker.open(url, memory, retention_ms, dead_ms, self.durability)

    async def aclose(self) -> None:
        """Close the running loop's connections now (they are closed at the loop's end anyway)."""
        await self._async_brokers.aclose()

    def limit(self, name: str, *, concurrency: int | None = None, rate: str | None = None) -> None:
        """A limit shared by the tasks naming it (``@app.task(limits=[name])``), across workers: see named_limits.py."""
        self.named_limits.define(name, concurrency, rate)

    @overload
    def task(self, func: Callable[P, R], /) -> Task[P, R]: ...

    @overload
    def task(
        self,
        /,
        *,
        name: str | None = None,
        queue: str = "default",
        priority: Priority | str | int = Priority.NORMAL,
        max_attempts: int = 3,
        max_worker_losses: int = 2,
        timeout: float | None = None,
        backoff: float | BackoffPolicy = 1.0,
        unique: bool = False,
        unique_for: float | None = None,
        unique_key: Callable[..., Any] | None = None,
        rate_limit: str | None = None,
        concurrency: int | None = None,
        retry_on: type[BaseException] | tuple[type[BaseException], ...] | None = None,
        dont_retry_on: type[BaseException] | tuple[type[BaseException], ...] | None = None,
        soft_timeout: float | None = None,
        expires: float | timedelta | datetime | None = None,
        key: str | Callable[..., str] | None = None,
        debounce: float | None = None,
        debounce_max_wait: float | None = None,
        key_concurrency: int | None = None,
        key_rate_limit: str | None = None,
        limits: list[str] | tuple[str, ...] | None = None,
    ) -> Callable[[Callable[P, R]], Task[P, R]]: ...

    def task(
        self, func: Callable[P, R] | None = None, /, **given: Any
    ) -> Task[P, R] | Callable[[Callable[P, R]], Task[P, R]]:
        """Register a function as a task: ``@app.task`` or ``@app.task(priority="high", ...)``.

        Every option is checked here, so a typo fails at import time, not in a
        worker at 3 a.m.; Celery's options (``bind=True``...) raise ``TypeError``
        naming the taskforge way. (Declared in ``decorator_options.py``; the
        second overload repeats them for type checkers, held to them by a test.)
        """
        reject_options("@app.task", {k: v for k, v in given.items() if k not in OPTION_NAMES})
        declared = DecoratorOptions(**given)
        options = build_options(declared)
        name, backoff = declared.name, declared.backoff

        def register(fn: Callable[P, R]) -> Task[P, R]:
            refuse_stacked("@app.task", fn, self.schedules)
            if not callable(fn):
                raise ConfigurationError(f"@app.task decorates a function, not {fn!r}")
            qualname = getattr(fn, "__qualname__", None)  # a partial or a callable object has none
            if name is None and not qualname:
                raise ConfigurationError(f"@app.task cannot name {fn!r} (it has no __qualname__); pass name=")
            task_name = name or f"{module_name(fn)}.{qualname}"
            if task_name in self.tasks:
                raise ConfigurationError(f"two tasks named {task_name!r}; give one of them another name= option")
            registered = Task(self, fn, task_name, self.named_limits.resolve(task_name, options), backoff)
            self.tasks[task_name] = registered
            return registered

        if func is not None:
            return register(func)
        return register

    def periodic(
        self,
        *,
        cron: str | None = None,
        every: timedelta | float | None = None,
        timezone: str = "UTC",
        catch_up: bool = True,
        **options: Any,
    ) -> Callable[[Callable[[], R]], Task[[], R]]:
        """Register a task that the workers enqueue on schedule, once per tick.

        ``cron`` is a 5-field cron expression evaluated in ``timezone``;
        ``every`` a fixed interval (ticks aligned on multiples of it since the
        epoch, so every worker agrees). ``catch_up=False``: a starting worker
        does not enqueue the tick that fell before its start. Other options
        are ``@app.task``'s.
        """

        def register(fn: Callable[[], R]) -> Task[[], R]:
            refuse_stacked("@app.periodic", fn, self.schedules, "cron" if cron is not None else "every")
            task = self.task(**options)(fn)
            try:
                self.schedules.append(Schedule.build(task, cron, timezone, every, catch_up))
            except ConfigurationError:
                del self.tasks[task.name]
                raise
            return task

        return register

    def send(self, task_name: str, /, *args: Any, **kwargs: Any) -> JobHandle[Any]:
        """Queue a job by task name, without importing the task's code.

        The name is not checked: a worker that does not know it dead-letters
        the job with an ``UnknownTask`` error.  Options come from the task when
        this app has it registered; otherwise the job goes to the default queue
        at normal priority, and the worker's definition of the task supplies
        max_attempts and timeout.
        """
        return self.task_for(task_name).delay(*args, **kwargs)

    async def asend(self, task_name: str, /, *args: Any, **kwargs: Any) -> JobHandle[Any]:
        """``send()``, awaited: queue a job by task name without blocking the event loop."""
        return await self.task_for(task_name).adelay(*args, **kwargs)

    def task_for(self, task_name: str) -> Task[Any, Any]:
        """The registered task, or a stand-in with default options that can only be queued."""
        known = self.tasks.get(task_name)
        if known is not None:
            return known
        if not isinstance(task_name, str) or not task_name:
            raise ConfigurationError(f"task name {task_name!r}: use a non-empty string")
        return Task(self, _unregistered, task_name, TaskOptions(), registered=False)

    def on(self, event: str) -> Callable[[Callable[[Event], Any]], Callable[[Event], Any]]:
        """Register a hook: ``@app.on("job_succeeded")``. Events: see ``taskforge.hooks.EVENTS``.

        Hooks run in the worker process that saw the event; one that raises
        is logged and changes nothing for the job.
        """
        return self.hooks.on(event)

    def middleware(self, func: Middleware) -> Middleware:
        """Wrap every task run in this app's workers: ``func(job_info, call_next)``."""
        return self.hooks.add_middleware(func)

    def around_enqueue(self, func: SendHook) -> SendHook:
        """Wrap every enqueue from this app: ``func(outgoing)`` may add ``outgoing.headers`` and may
        return a context manager held around the store (see ``taskforge.sending``)."""
        check_hook(func)
        self.send_hooks.append(func)
        return func

    def drain(self, *, advance: timedelta | float | None = None, max_jobs: int = 100_000) -> list[JobInfo]:
        """Run every ready job in this process, until none is ready; returns what ran.

        For tests (see ``taskforge.testing``). ``advance`` makes jobs scheduled
        or retrying within that much time due now, again after every job, so
        retries and schedules play out without waiting.
        """
        from .inprocess import drain  # the door to worker code: see docs/architecture.md

        return drain(self, advance=advance, max_jobs=max_jobs)

    async def adrain(self, *, advance: timedelta | float | None = None, max_jobs: int = 100_000) -> list[JobInfo]:
        """``drain()`` for async code (pytest-asyncio, anyio): awaits async tasks on the running loop.

        Sync tasks and Redis calls run in the loop's default executor, so
        the caller's other coroutines keep running meanwhile.
        """
        from .inprocess import adrain  # the door to worker code: see docs/architecture.md

        return await adrain(self, advance=advance, max_jobs=max_jobs)

    def queues(self) -> list[str]:
        """The queues a worker of this app serves by default: its tasks' queues, then ``default``.

        ``default`` always: ``app.send`` of an unknown task puts the job there, to be dead-lettered.
        """
        return list(dict.fromkeys([*(t.queue for t in self.tasks.values()), "default"]))

    def queue(self, name: str) -> QueueHandle:
        """A handle on one queue, ``app.queue("mail").pause()``: the name checked here, nothing sent yet."""
        return QueueHandle(self, name)

    def pause(self, queue: str) -> None:
        """Workers start no new job from ``queue`` until ``resume(queue)``: ``app.queue(queue).pause()``."""
        self.queue(queue).pause()

    def resume(self, queue: str) -> None:
        """Lift ``pause(queue)``: ``app.queue(queue).resume()``."""
        self.queue(queue).resume()

    def paused(self) -> set[str]:
        """The paused queues among this app's and every queue Redis knows (one round trip for all)."""
        return self.broker.flow.paused(known_queues(self))

    async def apause(self, queue: str) -> None:
        """``pause()``, awaited: ``await app.queue(queue).apause()``."""
        await self.queue(queue).apause()

    async def aresume(self, queue: str) -> None:
        """``resume()``, awaited: ``await app.queue(queue).aresume()``."""
        await self.queue(queue).aresume()

    async def apaused(self) -> set[str]:
        """``paused()``, awaited."""
        return await self.async_broker().flow.paused(await aknown_queues(self))

    def workflow(self, workflow_id: str) -> WorkflowHandle[Any]:
        """A handle for a workflow id received from elsewhere (``WorkflowHandle.id``)."""
        from .workflows.handle import WorkflowHandle

        if not isinstance(workflow_id, str) or not workflow_id:
            raise ConfigurationError(f"workflow id {workflow_id!r}: use the id string a WorkflowHandle gave you")
        return WorkflowHandle(self, workflow_id)

    def find_jobs(
        self,
        queue: str | None = None,
        state: JobState | str | None = None,
        task: str | None = None,
        key: str | None = None,
        match: str | None = None,
        since: timedelta | datetime | None = None,
        limit: int = 100,
        cursor: str | None = None,
    ) -> JobPage:
        """One page of the jobs that match, newest first by creation; ``page.cursor`` asks for the next.

        ``match`` finds text in the id, task, key, arguments or error; ``key``
        matches exactly; ``since`` is a ``timedelta`` or an aware ``datetime``
        (created since). Read from each queue's search index, never a walk
        over every job: a page stops at ``limit`` jobs or once it has looked
        a while (then it may hold fewer, and its cursor goes on from where it
        got to). A ``ValueError`` names a filter that cannot be used (an
        unknown queue or state, a naive datetime, a cursor of another query).
        """
        filters = query(self, queue=queue, state=state, task=task, key=key, match=match, since=since)
        return find_jobs(self, filters, limit, cursor)

    def job(self, job_id: str) -> JobHandle[Any]:
        """The handle of a job id from elsewhere, looked up at once as RQ's ``Job.fetch`` is.

        An id with no record (never sent, or past ``retention``) raises ``JobNotFound`` here, not
        later. In a running event loop the first awaited call looks (``await h.ainfo()`` raises):
        the loop is never blocked on Redis.
        """
        if not isinstance(job_id, str) or not job_id:
            raise ConfigurationError(f"job id {job_id!r}: use the id string a JobHandle gave you")
        return JobHandle(self, job_id, None if in_event_loop() else find_queue(self, job_id))

    if not TYPE_CHECKING:  # hidden from type checkers: a typo stays a static error

        def __getattr__(self, name: str) -> Any:
            """Only for names not found: Celery's (``AsyncResult``, ``send_task``...) name the taskforge way."""
            raise celery_names.attribute_error("TaskForge", name, celery_names.APP)


def _unregistered(*args: Any, **kwargs: Any) -> Any:
    raise ConfigurationError("this task is not registered in this app; it can only be sent by name")
