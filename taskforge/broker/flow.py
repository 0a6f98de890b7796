"""Flow control: pause and resume of whole queues, and what is held back (docs/howto/scheduling.md, "Pausing a queue").

A pause is one key in the queue's slot (``QueueKeys.paused``), set and
cleared by ``pause.lua``; every claim and peek reads it first, so it holds
for every worker, survives their restarts, and needs no message to any of
them. Resume wakes the idle ones. The queue is added to the index of queues,
so a queue paused before its first job is still listed.

``held`` counts the jobs in lanes held back by their task's limits, and
``held_reason`` says why one pending job waits (``broker/held.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, cast

from . import calls, junk, keys
from .held import HELD_CHUNK, queue_reads, reason
from .keys import QueueKeys, validate_queue_name

if TYPE_CHECKING:
    from .aio import AsyncLink
    from .link import Link


class Flow:
    """Pause, resume, and which queues are paused, on one app's Redis (``Broker.flow``)."""

    def __init__(self, link: Link) -> None:
        self.client = link.client
        self.scripts = link.scripts
        self.guard = link.guard

    def pause(self, queue: str) -> bool:
        """Stop the starts of ``queue``: True when it was running, False when already paused."""
        return self._set(queue, on=True)

    def resume(self, queue: str) -> bool:
        """Let ``queue`` start jobs again: True when it was paused."""
        return self._set(queue, on=False)

    def paused(self, queues: Sequence[str]) -> set[str]:
        """Which of ``queues`` are paused (one pipelined round trip)."""
        if not queues:
            return set()
        with self.guard():
            pipe = self.client.pipeline(transaction=False)
            for queue in queues:
                pipe.exists(QueueKeys(queue).paused)
            found = pipe.execute()
        return {queue for queue, there in zip(queues, found, strict=True) if there}

    def held(self, queue: str) -> int:
        """How many jobs of ``queue`` wait in lanes held back by their task's limits (their heads and the rest)."""
        q = QueueKeys(queue)
        total = 0
        with self.guard(queue):
            lanes = cast("list[bytes]", junk.read(lambda: self.client.hkeys(q.held_head), q.held_head, []))
            for start in range(0, len(lanes), HELD_CHUNK):
                chunk = lanes[start : start + HELD_CHUNK]
                sizes = junk.read(partial(self.client.hmget, q.lane_size, chunk), q.lane_size, [])
                total += sum(junk.count(n, q.lane_size) for n in sizes)
        return total

    def held_reason(self, queue: str, fields: dict[bytes, bytes]) -> str | None:
        """Why the pending job whose record is ``fields`` does not start (None: nothing holds it back)."""
        lane = _lane(fields)
        with self.guard(queue):
            pipe = self.client.pipeline(transaction=False)
            queue_reads(pipe, QueueKeys(queue), lane)
            return reason(lane, pipe.execute())

    def _set(self, queue: str, *, on: bool) -> bool:
        validate_queue_name(queue)
        with self.guard(queue):
            self.client.sadd(keys.QUEUES, queue)
            return self.scripts.run(calls.pause(QueueKeys(queue), on=on))


class AsyncFlow:
    """``Flow``, awaited (``AsyncBroker.flow``)."""

    def __init__(self, link: AsyncLink) -> None:
        self.client: Any = link.client
        self.run = link.run
        self.guard = link.guard

    async def pause(self, queue: str) -> bool:
        """``Flow.pause``, awaited."""
        return await self._set(queue, on=True)

    async def resume(self, queue: str) -> bool:
        """``Flow.resume``, awaited."""
        return await self._set(queue, on=False)

    async def paused(self, queues: Sequence[str]) -> set[str]:
        """``Flow.paused``, awaited."""
        if not queues:
            return set()
        async with self.guard():
            pipe = self.client.pipeline(transaction=False)
            for queue in queues:
                pipe.exists(QueueKeys(queue).paused)
            found = await pipe.execute()
        return {queue for queue, there in zip(queues, found, strict=True) if there}

    async def held_reason(self, queue: str, fields: dict[bytes, bytes]) -> str | None:
        """``Flow.held_reason``, awaited."""
        lane = _lane(fields)
        async with self.guard(queue):
            pipe = self.client.pipeline(transaction=False)
            queue_reads(pipe, QueueKeys(queue), lane)
            return reason(lane, await pipe.execute())

    async def _set(self, queue: str, *, on: bool) -> bool:
        validate_queue_name(queue)
        async with self.guard(queue):
            await self.client.sadd(keys.QUEUES, queue)
            return await self.run(calls.pause(QueueKeys(queue), on=on))


def _lane(fields: dict[bytes, bytes]) -> str | None:
    raw = fields.get(b"lane")
    return raw.decode(errors="replace") if raw else None
