"""Following a job's stream (``JobHandle.stream`` / ``astream``): every item from the first, then live ones.

A reader keeps the id of the last entry it yielded and asks Redis for what
comes after it (``XREAD``, blocking a slice at a time), so it never misses or
repeats an item, whoever else reads, and across a worker crash or a Redis
restart (a stream is saved like any other key). When a slice brings nothing
the same call reads the job's state: once the job has finished, one more
read takes whatever was written before the end, and the reader stops.

A read that fails because Redis went away (a restart, a failover, a pause)
is tried again after a short wait from the same place, for up to
``RECONNECT_FOR`` seconds without an answer: the reader picks up after the
last item it yielded, so an outage costs it time, never an item.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import TYPE_CHECKING, Any

from .broker import job_plans
from .broker.plan import Plan, Sleep
from .errors import BrokerUnavailable, CorruptPayload, JobNotFound
from .job import JobState
from .serialization import loads

if TYPE_CHECKING:
    from .broker.aio_roles import AsyncBrokerRoles
    from .broker.roles import BrokerRoles
    from .broker.stream_reads import StreamRead

# A reader blocks on Redis this long at a time, then looks at the job's state:
# items arrive at once (XREAD wakes on XADD); the end is seen within a slice.
STREAM_SLICE = 0.25
RECONNECT_FOR = 30.0  # seconds a reader keeps asking an unreachable Redis before it raises


class _Reader:
    """Where one reader stands: the last entry it yielded, and when it last got an item (for ``timeout``)."""

    def __init__(self, job_id: str, timeout: float | None) -> None:
        self.job_id = job_id
        self.timeout = timeout
        self.after = "0-0"
        self.since = time.monotonic()
        self.down_since: float | None = None  # when reads began to fail (Redis unreachable)
        self.backoff = 0.0
        self.finished = False  # the job has ended: what is left is read without waiting

    def block(self) -> float:
        """How long the next read may wait: a slice, or what is left of ``timeout``."""
        if self.timeout is None:
            return STREAM_SLICE
        return max(0.001, min(STREAM_SLICE, self.since + self.timeout - time.monotonic()))

    def take(self, read: StreamRead) -> Iterator[Any]:
        """The items of ``read`` decoded, moving past each as it is yielded; ``timeout`` counts from the last."""
        for entry, raw in read.items:
            try:
                value = loads(raw)
            except CorruptPayload as exc:
                raise CorruptPayload(f"item {entry} of the stream of job {self.job_id}: {exc}") from None
            self.after = entry
            yield value
        self.since = time.monotonic()

    def unreachable(self, exc: BrokerUnavailable) -> float:
        """After a failed read: how long to wait before the next try; raises once Redis was away too long."""
        now = time.monotonic()
        if self.down_since is None:
            self.down_since = now
        if now - self.down_since >= RECONNECT_FOR or (self.timeout is not None and now - self.since >= self.timeout):
            raise exc
        self.backoff = min(1.0, self.backoff * 2 or 0.05)
        return self.backoff

    def next_read(self, queue: str) -> Plan[StreamRead | None]:
        """The next read that brought items, waiting a slice at a time; None once the job has finished
        and a last read (without waiting) brought nothing more."""
        while not self.finished:
            found = yield from self.read(queue, self.block())
            if found.items:
                return found
            self.finished = self.ended(found)
        found = yield from self.read(queue, 0)
        return found if found.items else None

    def read(self, queue: str, block: float) -> Plan[StreamRead]:
        """One read of the stream after ``after``, tried again from the same place while Redis is away."""
        while True:
            try:
                found = yield from job_plans.read_stream(queue, self.job_id, self.after, block)
            except BrokerUnavailable as exc:
                yield Sleep(self.unreachable(exc))
                continue
            self.down_since, self.backoff = None, 0.0
            return found

    def ended(self, read: StreamRead) -> bool:
        """After an empty read: whether the job has finished; raises once ``timeout`` has passed without an item."""
        if read.state is None:
            raise JobNotFound(f"no job {self.job_id}: it never existed, or its record expired (retention)")
        try:
            if JobState(read.state).finished:
                return True
        except ValueError:
            return True  # junk in the state field reads as dead, as everywhere else
        if self.timeout is not None and time.monotonic() - self.since >= self.timeout:
            raise TimeoutError(f"job {self.job_id} streamed nothing new within {self.timeout} s (state: {read.state})")
        return False


def follow(broker: BrokerRoles, queue: str, job_id: str, timeout: float | None) -> Iterator[Any]:
    """``JobHandle.stream``'s generator."""
    reader = _Reader(job_id, timeout)
    while (found := broker.drive(reader.next_read(queue))) is not None:
        yield from reader.take(found)


async def afollow(
    access: Callable[[], Awaitable[tuple[AsyncBrokerRoles, str]]], job_id: str, timeout: float | None
) -> AsyncIterator[Any]:
    """``JobHandle.astream``'s generator: the loop runs other coroutines while a read waits.

    ``access`` gives this loop's broker and the job's queue, looked up on
    the loop once the first item is asked for.
    """
    broker, queue = await access()
    reader = _Reader(job_id, timeout)
    while (found := await broker.drive(reader.next_read(queue))) is not None:
        for value in reader.take(found):
            yield value
