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

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import TYPE_CHECKING, Any

from .errors import BrokerUnavailable, CorruptPayload, JobNotFound
from .job import JobState
from .serialization import loads

if TYPE_CHECKING:
    from .broker.aio_roles import AsyncJobsRole
    from .broker.roles import JobsRole
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

    def block(self) -> float:
        """How long the next read may wait: a slice, or what is left of ``timeout``."""
        if self.timeout is None:
            return STREAM_SLICE
        return max(0.001, min(STREAM_SLICE, self.since + self.timeout - time.monotonic()))

    def take(self, read: StreamRead) -> Iterator[Any]:
        """The items of ``read`` decoded, moving past each as it is yielded."""
        for entry, raw in read.items:
            try:
                value = loads(raw)
            except CorruptPayload as exc:
                raise CorruptPayload(f"item {entry} of the stream of job {self.job_id}: {exc}") from None
            self.after = entry
            yield value

    def unreachable(self, exc: BrokerUnavailable) -> float:
        """After a failed read: how long to wait before the next try; raises once Redis was away too long."""
        now = time.monotonic()
        if self.down_since is None:
            self.down_since = now
        if now - self.down_since >= RECONNECT_FOR or (self.timeout is not None and now - self.since >= self.timeout):
            raise exc
        self.backoff = min(1.0, self.backoff * 2 or 0.05)
        return self.backoff

    def answered(self) -> None:
        self.down_since, self.backoff = None, 0.0

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


def follow(jobs: JobsRole, queue: str, job_id: str, timeout: float | None) -> Iterator[Any]:
    """``JobHandle.stream``'s generator."""
    reader = _Reader(job_id, timeout)

    def read(block: float) -> StreamRead:
        while True:
            try:
                found = jobs.read_stream(queue, job_id, reader.after, block)
            except BrokerUnavailable as exc:
                time.sleep(reader.unreachable(exc))
                continue
            reader.answered()
            return found

    while True:
        found = read(reader.block())
        if found.items:
            yield from reader.take(found)
            reader.since = time.monotonic()
        elif reader.ended(found):
            while (found := read(0)).items:
                yield from reader.take(found)
            return


async def afollow(
    access: Callable[[], Awaitable[tuple[AsyncJobsRole, str]]], job_id: str, timeout: float | None
) -> AsyncIterator[Any]:
    """``JobHandle.astream``'s generator: the loop runs other coroutines while a read waits.

    ``access`` gives this loop's jobs role and the job's queue, looked up on
    the loop once the first item is asked for.
    """
    jobs, queue = await access()
    reader = _Reader(job_id, timeout)

    async def read(block: float) -> StreamRead:
        while True:
            try:
                found = await jobs.read_stream(queue, job_id, reader.after, block)
            except BrokerUnavailable as exc:
                await asyncio.sleep(reader.unreachable(exc))
                continue
            reader.answered()
            return found

    while True:
        found = await read(reader.block())
        if found.items:
            for value in reader.take(found):
                yield value
            reader.since = time.monotonic()
        elif reader.ended(found):
            while (found := await read(0)).items:
                for value in reader.take(found):
                    yield value
            return
