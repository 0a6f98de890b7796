"""``JobHandle``: what ``delay()`` returns, and what ``app.job(id)`` rebuilds elsewhere."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import TYPE_CHECKING, Any, Generic, NoReturn, Protocol, TypeVar, cast

from . import celery_names, joins, other_names, streams
from .broker import job_plans
from .broker.keys import QueueKeys
from .broker.plan import Plan
from .broker.record import Field
from .broker.record import job_info as job_info
from .errors import ConfigurationError, CorruptPayload, JobNotFound, TaskFailed
from .finals import FinalTransition
from .job import JobInfo, JobState
from .serialization import loads

if TYPE_CHECKING:
    from .broker.aio_roles import AsyncBrokerRoles
    from .protocols import BrokerAccess

R = TypeVar("R")

# result() blocks on Redis in slices no longer than this, well under the
# client's socket timeout, so a long wait never looks like a dead connection.
WAIT_SLICE = 2.0
FINAL = (JobState.SUCCEEDED, JobState.DEAD, JobState.CANCELLED)
STATES = {state.value for state in JobState}
GONE = "it never existed, or it finished longer ago than the app's retention"


class AsyncAccess(Protocol):
    """What the ``a``-methods need besides ``BrokerAccess``: this loop's broker."""

    def async_broker(self) -> AsyncBrokerRoles: ...

    def queues(self) -> list[str]: ...


def async_access(app: object) -> AsyncAccess:
    """``app`` as an ``AsyncAccess``; a producer without an async side (a test double) is told so plainly."""
    if not hasattr(app, "async_broker"):  # hasattr, not a runtime protocol check: this is on every a-call
        raise ConfigurationError(f"{app!r} has no async broker: the a-methods need a TaskForge app")
    return cast(AsyncAccess, app)


def known_queues(app: BrokerAccess) -> list[str]:
    """The app's own queues, then every other queue Redis knows (enqueued to or paused)."""
    return list(dict.fromkeys([*app.queues(), *app.broker.jobs.queues()]))


async def aknown_queues(app: AsyncAccess) -> list[str]:
    """``known_queues()``, awaited."""
    return list(dict.fromkeys([*app.queues(), *await app.async_broker().jobs.queues()]))


def in_event_loop() -> bool:
    """Whether the caller runs in an event loop, where a sync Redis call would hold every other task up."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def find_queue(app: BrokerAccess, job_id: str) -> str:
    """Which queue holds ``job_id``: the app's own queues first, then every known queue."""
    return app.broker.drive(locating(app.queues(), job_id))


async def afind_queue(app: AsyncAccess, job_id: str) -> str:
    """``find_queue()``, awaited."""
    return await app.async_broker().drive(locating(app.queues(), job_id))


def locating(own: list[str], job_id: str) -> Plan[str]:
    """``find_queue``: the queues ``own`` first, then the other queues Redis knows, each set in one round trip
    (a job of the app's own queues, the common case, is found in one)."""
    found = yield from job_plans.holding(own, job_id)
    if found is not None:
        return found
    queues = list(dict.fromkeys([*own, *(yield from job_plans.queues())]))
    found = yield from job_plans.holding([queue for queue in queues if queue not in own], job_id)
    if found is not None:
        return found
    raise _no_queue_holds(job_id, queues)


def stopping(stop: Callable[[str, str, int], Plan[int]], queue: str, job_id: str, retention_ms: int) -> Plan[int]:
    """A cancel or an abort (``stop``: ``job_plans.cancel`` or ``abort``); JobNotFound for no such job."""
    outcome = yield from stop(queue, job_id, retention_ms)
    if outcome < 0:
        raise JobNotFound(f"no job {job_id} in queue {queue!r}: {GONE}")
    return outcome


def _no_queue_holds(job_id: str, queues: list[str]) -> JobNotFound:
    return JobNotFound(f"no job {job_id} in any queue ({', '.join(queues)}): {GONE}")


def state_of(fields: dict[bytes, bytes]) -> JobState:
    """The state a job record holds; junk reads as dead, as ``taskforge job`` shows it."""
    state = fields.get(b"state", b"pending").decode(errors="replace")
    try:
        return JobState(state)
    except ValueError:
        return JobState.DEAD


def known_state(raw: bytes | None) -> JobState | None:
    """The state a record's raw field names; None for none, or junk."""
    text = raw.decode(errors="replace") if raw is not None else None
    return JobState(text) if text in STATES else None


def ended(state: str) -> bool:
    """Whether ``result()`` stops waiting: a final state, or junk (which reads as dead, and would never change)."""
    return state in FINAL or state not in STATES


def stored_result(fields: dict[bytes, bytes], key: str) -> Any:
    """A succeeded job's value; a result field that does not decode raises ``CorruptPayload`` naming the key
    (never None, which a task may have returned)."""
    raw = fields.get(Field.RESULT.key)
    if raw is None:
        return None
    try:
        return loads(raw)
    except CorruptPayload as exc:
        raise CorruptPayload(
            f"the job succeeded, but the result stored in {key} (field {Field.RESULT.value!r}) cannot be read: {exc}"
        ) from None


def time_left(job_id: str, deadline: float | None, timeout: float | None, state: str) -> float:
    """How long the next wait may block: a slice, or what is left; TimeoutError once nothing is."""
    remaining = WAIT_SLICE if deadline is None else deadline - time.monotonic()
    if remaining <= 0:
        raise TimeoutError(f"job {job_id} did not finish within {timeout} s (state: {state})")
    return min(remaining, WAIT_SLICE)


class JobHandle(Generic[R]):
    """A reference to one job by id; cheap, holds no state but the id and its queue.

    ``app`` is what the handle reads through: a ``TaskForge``, or anything with
    its broker and its queues (the ``BrokerAccess`` protocol).
    """

    def __init__(self, app: BrokerAccess, job_id: str, queue: str | None = None) -> None:
        self.app = app
        self.id = job_id
        self._queue = queue

    def __repr__(self) -> str:
        return f"<JobHandle {self.id} queue={self._queue}>"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, JobHandle) and other.id == self.id

    def __hash__(self) -> int:
        return hash(self.id)

    @property
    def queue(self) -> str:
        """The job's queue, looked up once for handles made from a bare id."""
        if self._queue is None:
            self._queue = find_queue(self.app, self.id)
        return self._queue

    def _fields(self) -> dict[bytes, bytes]:
        fields = self.app.broker.jobs.read(self.queue, self.id)
        if fields is None:
            raise JobNotFound(self._missing())
        return fields

    def _missing(self) -> str:
        return f"no job {self.id} in queue {self._queue!r}: {GONE}"

    def status(self) -> JobState:
        return state_of(self._fields())

    def info(self) -> JobInfo:
        fields = self._fields()
        held = self.app.broker.flow.held_reason(self.queue, fields) if state_of(fields) is JobState.PENDING else None
        return job_info(self.id, self.queue, fields, held)

    def cancel(self) -> bool:
        """True if the job was pending, scheduled, retrying or deferred and will now never run."""
        return self._stop(job_plans.cancel) == 1

    def retry(self) -> bool:
        """Put a dead job back in line to run again, its attempts counted afresh, as ``taskforge dead retry``.

        A dead step of a workflow resumes its dead workflow (``WorkflowHandle.retry()``).
        True if the job was dead and is queued again; False if it was not dead.
        """
        if self.status() is not JobState.DEAD:
            return False
        from .workflows.resume import retry_dead  # loaded by the first retry: not a final transition

        return self.id in retry_dead(self.app.broker, self.queue, [self.id])

    def abort(self) -> bool:
        """Stop the job: cancelled now if not started; if running, its worker kills it.

        A running job is stopped at its supervisor's next lease check (within
        about a second) and ends ``cancelled``. Returns False when the job had
        already finished.
        """
        return self._stop(job_plans.abort) > 0

    def _stop(self, stop: Callable[[str, str, int], Plan[int]]) -> int:
        """A cancel's or an abort's outcome; 1 (cancelled now, not a running job aborted) is a final transition."""
        broker = self.app.broker
        outcome = broker.drive(stopping(stop, self.queue, self.id, broker.settings.retention_ms))
        if outcome == 1:
            self.app.finals.ended(broker, FinalTransition(self.queue, self.id, "cancelled"))
        return outcome

    def result(self, timeout: float | None = None, *, allow_join: bool = False) -> R:
        """Wait for the job to finish and return its value.

        Blocks on Redis (no polling loop spinning the CPU). Raises TaskFailed if
        the job ended dead or cancelled, TimeoutError if ``timeout`` seconds pass.
        Inside a running task a wait (any ``timeout`` but 0) raises RuntimeError
        unless ``allow_join``; in ``app.drain()`` and eager mode it runs the job
        first (``taskforge/joins.py`` says why).
        """
        joins.before_waiting(self._join(timeout, allow_join))
        deadline = None if timeout is None else time.monotonic() + timeout
        broker = self.app.broker
        while True:
            state = broker.jobs.await_state(self.queue, self.id)
            if state is None:
                raise JobNotFound(self._missing())
            if ended(state):
                return self._outcome(self.queue, self._fields())
            broker.jobs.wait_done(self.queue, self.id, time_left(self.id, deadline, timeout, state))

    def _join(self, timeout: float | None, allow_join: bool) -> joins.Join:
        return joins.Join(self.app, f"job {self.id}", timeout, allow_join, self._settled, self.status)

    def _settled(self) -> bool:
        """Whether a wait would end now: the job ended, or is gone (the wait then says so)."""
        state = self.app.broker.jobs.await_state(self.queue, self.id)
        return state is None or ended(state)

    def stream(self, timeout: float | None = None) -> Iterator[Any]:
        """Every item the job streamed (``current_job().stream``), in order from the first, then live ones.

        Stops once the job has finished, whatever its end, and every item was
        read (``result()`` says how it ended). ``timeout`` bounds the wait for
        the next item (``TimeoutError``); None waits as long as the job runs.
        Any number of readers, in any process, each see every item once.
        """
        return streams.follow(self.app.broker, self.queue, self.id, timeout)

    def astream(self, timeout: float | None = None) -> AsyncIterator[Any]:
        """``stream()`` for ``async for``: the loop runs other coroutines while it waits."""

        async def access() -> tuple[AsyncBrokerRoles, str]:
            return async_access(self.app).async_broker(), await self._aqueue()

        return streams.afollow(access, self.id, timeout)

    def _outcome(self, queue: str, fields: dict[bytes, bytes]) -> R:
        info = job_info(self.id, queue, fields)
        if info.state is JobState.SUCCEEDED:
            return cast(R, stored_result(fields, QueueKeys(queue).job(self.id)))
        raise TaskFailed(
            self.id, info.state.value, info.error, info.traceback, info.failure, error_type=info.error_type
        )

    def get(self, timeout: float | None = None, *, allow_join: bool = False, **celery_options: NoReturn) -> R:
        """``result(timeout)`` under Celery's name, for code being ported.

        Celery's other options (``propagate``, ``interval``...) raise
        ``TypeError`` naming the taskforge way: a failed job always raises
        ``TaskFailed``, and the wait blocks on Redis rather than polling.
        """
        celery_names.reject_get_options("JobHandle.get()", celery_options)
        return self.result(timeout, allow_join=allow_join)

    async def aget(self, timeout: float | None = None, *, allow_join: bool = False, **celery_options: NoReturn) -> R:
        """``get()``, awaited: ``aresult(timeout)``."""
        celery_names.reject_get_options("JobHandle.aget()", celery_options)
        return await self.aresult(timeout, allow_join=allow_join)

    if not TYPE_CHECKING:  # hidden from type checkers: a typo stays a static error

        def __getattr__(self, name: str) -> Any:
            """Only for names not found: Celery's (``state``, ``ready``...) name the taskforge way."""
            raise celery_names.attribute_error("JobHandle", name, celery_names.HANDLE)

        @staticmethod
        def fetch(*args: Any, **kwargs: Any) -> NoReturn:
            """RQ's ``Job.fetch(id, connection=...)``: a handle comes from its app, which knows the broker."""
            raise TypeError(f"JobHandle.fetch(): {other_names.MODULE['Job'][1]} (RQ's Job.fetch(id, connection=...))")

    # -- the same, awaited: they never block the event loop ------------------

    async def _aqueue(self) -> str:
        if self._queue is None:
            self._queue = await afind_queue(async_access(self.app), self.id)
        return self._queue

    async def _afields(self) -> dict[bytes, bytes]:
        fields = await async_access(self.app).async_broker().jobs.read(await self._aqueue(), self.id)
        if fields is None:
            raise JobNotFound(self._missing())
        return fields

    async def astatus(self) -> JobState:
        """``status()``, awaited."""
        return state_of(await self._afields())

    async def ainfo(self) -> JobInfo:
        """``info()``, awaited."""
        fields = await self._afields()
        queue = await self._aqueue()
        held = None
        if state_of(fields) is JobState.PENDING:
            held = await async_access(self.app).async_broker().flow.held_reason(queue, fields)
        return job_info(self.id, queue, fields, held)

    async def acancel(self) -> bool:
        """``cancel()``, awaited."""
        return await self._astop(job_plans.cancel) == 1

    async def aretry(self) -> bool:
        """``retry()``, awaited: the rare operator's call runs on a worker thread, off the loop."""
        return await asyncio.to_thread(self.retry)

    async def aabort(self) -> bool:
        """``abort()``, awaited."""
        return await self._astop(job_plans.abort) > 0

    async def _astop(self, stop: Callable[[str, str, int], Plan[int]]) -> int:
        """``_stop()``, awaited: the listeners of the final transition are awaited too."""
        queue, broker = await self._aqueue(), async_access(self.app).async_broker()
        if (outcome := await broker.drive(stopping(stop, queue, self.id, broker.settings.retention_ms))) == 1:
            await self.app.finals.aended(broker, FinalTransition(queue, self.id, "cancelled"))
        return outcome

    async def aresult(self, timeout: float | None = None, *, allow_join: bool = False) -> R:
        """``result()``, awaited: a blocking pop on the job's done list, in slices, never a polling loop.

        Other coroutines of the loop run meanwhile. Raises TaskFailed if the job
        ended dead or cancelled, TimeoutError if ``timeout`` seconds pass. Inside
        a running task the same rule as ``result()``: the awaiting task holds
        its slot as surely as a blocked one.
        """
        await joins.abefore_waiting(self._join(timeout, allow_join))
        deadline = None if timeout is None else time.monotonic() + timeout
        broker = async_access(self.app).async_broker()
        queue = await self._aqueue()
        while True:
            state = await broker.jobs.await_state(queue, self.id)
            if state is None:
                raise JobNotFound(self._missing())
            if ended(state):
                fields = await broker.jobs.read(queue, self.id)
                if fields is None:
                    raise JobNotFound(self._missing())
                return self._outcome(queue, fields)
            await broker.jobs.wait_done(queue, self.id, time_left(self.id, deadline, timeout, state))
