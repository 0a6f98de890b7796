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
from .drivers import adrive, drive
from .held import HELD_CHUNK, queue_reads, reason
from .keys import QueueKeys, validate_queue_name
from .plan import Command, Pipeline, Plan, Script

if TYPE_CHECKING:
    from .aio import AsyncLink
    from .link import Link


def set_pause(queue: str, *, on: bool) -> Plan[bool]:
    """Pause (``on``) or resume ``queue``: True when that changed something. The queue is listed first."""
    validate_queue_name(queue)
    yield Command(lambda client: client.sadd(keys.QUEUES, queue), guard=(queue,))
    return (yield Script(calls.pause(QueueKeys(queue), on=on), guard=(queue,)))  # type: ignore[no-any-return]


def paused(queues: Sequence[str]) -> Plan[set[str]]:
    """Which of ``queues`` are paused (one pipelined round trip)."""
    if not queues:
        return set()

    def fill(pipe: Any) -> None:
        for queue in queues:
            pipe.exists(QueueKeys(queue).paused)

    found = yield Pipeline(fill)
    return {queue for queue, there in zip(queues, found, strict=True) if there}


def held_reason(queue: str, fields: dict[bytes, bytes]) -> Plan[str | None]:
    """Why the pending job whose record is ``fields`` does not start (None: nothing holds it back)."""
    lane = _lane(fields)
    replies = yield Pipeline(partial(queue_reads, q=QueueKeys(queue), lane=lane), guard=(queue,))
    return reason(lane, replies)


class Flow:
    """Pause, resume, and which queues are paused, on one app's Redis (``Broker.flow``)."""

    def __init__(self, link: Link) -> None:
        self.link = link
        self.client = link.client
        self.guard = link.guard

    def pause(self, queue: str) -> bool:
        """Stop the starts of ``queue``: True when it was running, False when already paused."""
        return drive(self.link, set_pause(queue, on=True))

    def resume(self, queue: str) -> bool:
        """Let ``queue`` start jobs again: True when it was paused."""
        return drive(self.link, set_pause(queue, on=False))

    def paused(self, queues: Sequence[str]) -> set[str]:
        """Which of ``queues`` are paused (one pipelined round trip)."""
        return drive(self.link, paused(queues))

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
        return drive(self.link, held_reason(queue, fields))


class AsyncFlow:
    """``Flow``, awaited (``AsyncBroker.flow``): the same plans on this loop."""

    def __init__(self, link: AsyncLink) -> None:
        self.link = link

    async def pause(self, queue: str) -> bool:
        """``Flow.pause``, awaited."""
        return await adrive(self.link, set_pause(queue, on=True))

    async def resume(self, queue: str) -> bool:
        """``Flow.resume``, awaited."""
        return await adrive(self.link, set_pause(queue, on=False))

    async def paused(self, queues: Sequence[str]) -> set[str]:
        """``Flow.paused``, awaited."""
        return await adrive(self.link, paused(queues))

    async def held_reason(self, queue: str, fields: dict[bytes, bytes]) -> str | None:
        """``Flow.held_reason``, awaited."""
        return await adrive(self.link, held_reason(queue, fields))


def _lane(fields: dict[bytes, bytes]) -> str | None:
    raw = fields.get(b"lane")
    return raw.decode(errors="replace") if raw else None
