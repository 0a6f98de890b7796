"""``QueueHandle``: one queue of an app, by name (``app.queue("mail")``): pause it, resume it, ask.

A paused queue still takes new jobs; workers start none of its jobs (those
already running finish, and the jobs a lane had claimed in its current batch
before the pause still start). The pause lives in Redis (``broker/flow.py``),
so it reaches every worker at its next claim, survives restarts, and is
lifted only by ``resume``.

A handle rather than more methods on the app: the app's own job is its
settings, its tasks and the way in for producers; what is done to one queue
belongs to that queue, as what is done to one job belongs to its
``JobHandle`` (``app.job(id)``). ``app.pause(queue)`` and its siblings stay,
as one-line delegations here.

RQ puts a job on a queue (``q.enqueue(f, *args)``, ``enqueue_in``,
``enqueue_at``); so does a handle, given a task (or a task's name): the
same job as ``task.with_options(queue=name).delay(...)``. A plain function
is no task: that raises, naming ``@app.task``.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from . import other_names
from .broker.keys import validate_queue_name
from .task import Task

if TYPE_CHECKING:
    from .app import TaskForge
    from .handle import JobHandle


class QueueHandle:
    """A queue of ``app`` by name; made by ``app.queue(name)``, which checks the name (nothing is sent)."""

    __slots__ = ("app", "name")

    def __init__(self, app: TaskForge, name: str) -> None:
        self.app = app
        self.name = validate_queue_name(name)

    def __repr__(self) -> str:
        return f"<QueueHandle {self.name} of {self.app.name}>"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, QueueHandle) and other.app is self.app and other.name == self.name

    def __hash__(self) -> int:
        return hash((id(self.app), self.name))

    def enqueue(self, task: Task[..., Any] | str, /, *args: Any, **kwargs: Any) -> JobHandle[Any]:
        """RQ's ``q.enqueue(f, *args, **kwargs)``: ``task.delay(*args, **kwargs)`` on this queue."""
        return self._task(task, "enqueue").delay(*args, **kwargs)

    def enqueue_in(
        self, delay: timedelta | float, task: Task[..., Any] | str, /, *args: Any, **kwargs: Any
    ) -> JobHandle[Any]:
        """RQ's ``q.enqueue_in(timedelta, f, ...)``: ``task.apply_in(delay, ...)`` on this queue."""
        return self._task(task, "enqueue_in").apply_in(delay, *args, **kwargs)

    def enqueue_at(self, when: datetime, task: Task[..., Any] | str, /, *args: Any, **kwargs: Any) -> JobHandle[Any]:
        """RQ's ``q.enqueue_at(datetime, f, ...)``: ``task.apply_at(when, ...)`` on this queue."""
        return self._task(task, "enqueue_at").apply_at(when, *args, **kwargs)

    def _task(self, task: object, method: str) -> Task[..., Any]:
        """The task whose jobs go to this queue; a task's name is looked up as ``app.send`` does."""
        if isinstance(task, str):
            task = self.app.task_for(task)
        if not isinstance(task, Task):
            name = getattr(task, "__name__", None) or repr(task)
            raise TypeError(
                f"queue.{method}({name}): {name} is not a task: register it with @app.task, "
                f"then {name}.delay(...) queues it (or app.queue({self.name!r}).{method}(task, ...))"
            )
        return task.with_options(queue=self.name)

    def pause(self) -> bool:
        """Workers start no new job of this queue until ``resume()``; enqueueing still works.

        True when the queue was running, False when it was already paused.
        """
        return self.app.broker.flow.pause(self.name)

    def resume(self) -> bool:
        """Lift ``pause()``: idle workers are woken and claim at once. True when the queue was paused."""
        return self.app.broker.flow.resume(self.name)

    def paused(self) -> bool:
        """Whether the queue is paused now (one read of its pause key)."""
        return self.name in self.app.broker.flow.paused([self.name])

    async def apause(self) -> bool:
        """``pause()``, awaited."""
        return await self.app.async_broker().flow.pause(self.name)

    async def aresume(self) -> bool:
        """``resume()``, awaited."""
        return await self.app.async_broker().flow.resume(self.name)

    async def apaused(self) -> bool:
        """``paused()``, awaited."""
        return self.name in await self.app.async_broker().flow.paused([self.name])

    if not TYPE_CHECKING:  # hidden from type checkers: a typo stays a static error

        def __getattr__(self, name: str) -> Any:
            """Only for names not found: RQ's Queue methods (``fetch_job``, ``count``...) name the taskforge way."""
            hint = other_names.attribute_hint("QueueHandle", name, other_names.QUEUE)
            raise AttributeError(hint or f"'QueueHandle' object has no attribute {name!r}")
