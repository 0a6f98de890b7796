"""``app.pause`` / ``resume`` / ``paused`` and their async twins: stop a queue's starts from anywhere.

SPEC, "Fairness and flow control". A paused queue still takes new jobs;
workers start none of its jobs (those already running finish, and the jobs
a lane had claimed in its current batch before the pause still start). The
pause lives in Redis (``broker/flow.py``), so it reaches every worker at its
next claim, survives restarts, and is lifted only by ``resume``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .broker import Broker
    from .broker.aio import AsyncBroker


class Pausing:
    """The pause methods of ``TaskForge`` (a mixin: the app's broker and queues are its own)."""

    if TYPE_CHECKING:

        @property
        def broker(self) -> Broker: ...

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
        known = list(dict.fromkeys([*self.queues(), *self.broker.jobs.queues()]))
        return self.broker.flow.paused(known)

    async def apause(self, queue: str) -> None:
        """``pause()``, awaited."""
        await self.async_broker().flow.pause(queue)

    async def aresume(self, queue: str) -> None:
        """``resume()``, awaited."""
        await self.async_broker().flow.resume(queue)

    async def apaused(self) -> set[str]:
        """``paused()``, awaited."""
        broker = self.async_broker()
        known = list(dict.fromkeys([*self.queues(), *await broker.jobs.queues()]))
        return await broker.flow.paused(known)
