"""``app.pause`` / ``resume`` / ``paused`` and their async twins: stop a queue's starts from anywhere.

As docs/howto/scheduling.md says ("Pausing a queue"): a paused queue still takes new jobs;
workers start none of its jobs (those already running finish, and the jobs
a lane had claimed in its current batch before the pause still start). The
pause lives in Redis (``broker/flow.py``), so it reaches every worker at its
next claim, survives restarts, and is lifted only by ``resume``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .handle import aknown_queues, known_queues

if TYPE_CHECKING:
    from .broker import Broker
    from .broker.aio import AsyncBroker
    from .finals import Finals


class Pausing:
    """The pause methods of ``TaskForge`` (a mixin: the app's broker and queues are its own)."""

    if TYPE_CHECKING:

        @property
        def broker(self) -> Broker: ...

        finals: Finals

        def async_broker(self) -> AsyncBroker: ...

        def queues(self) -> list[str]: ...

    def pause(self, queue: str) -> None:
        """Workers start no new job from ``queue`` until ``resume(queue)``; enqueueing still works."""
        self.broker.flow.pause(queue)

    def resume(self, queue: str) -> None:
        """Lift ``pause(queue)``: idle workers are woken and claim at once."""
        self.broker.flow.resume(queue)

    def paused(self) -> set[str]:
        """The paused queues among this app's and every queue Redis knows."""
        return self.broker.flow.paused(known_queues(self))

    async def apause(self, queue: str) -> None:
        """``pause()``, awaited."""
        await self.async_broker().flow.pause(queue)

    async def aresume(self, queue: str) -> None:
        """``resume()``, awaited."""
        await self.async_broker().flow.resume(queue)

    async def apaused(self) -> set[str]:
        """``paused()``, awaited."""
        return await self.async_broker().flow.paused(await aknown_queues(self))
