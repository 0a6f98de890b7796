"""``WorkflowHandle``: what ``chain(...).delay()`` returns and ``app.workflow(id)`` rebuilds elsewhere."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, NoReturn, TypeVar, cast

from .. import celery_names, joins
from ..errors import WorkflowNotFound
from ..handle import JobHandle, async_access
from ..sending import announce
from .delivery import step_id
from .following import WorkflowInfo as WorkflowInfo
from .following import WorkflowState as WorkflowState
from .following import cancelling, missing, reading_info, reading_state, waiting

if TYPE_CHECKING:
    from ..broker.replies import ResumeReply
    from ..protocols import BrokerAccess

R = TypeVar("R")
WAIT_SLICE = 2.0  # as JobHandle.result: block on Redis in slices well under the socket timeout


class WorkflowHandle(Generic[R]):
    """A reference to one workflow by id; holds nothing else, so it is cheap to rebuild anywhere."""

    def __init__(self, app: BrokerAccess, workflow_id: str) -> None:
        self.app = app
        self.id = workflow_id

    def __repr__(self) -> str:
        return f"<WorkflowHandle {self.id}>"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, WorkflowHandle) and other.id == self.id

    def __hash__(self) -> int:
        return hash(self.id)

    def _missing(self) -> WorkflowNotFound:
        return missing(self.id)

    def status(self) -> WorkflowState:
        return self.app.broker.drive(reading_state(self.id))

    def cancel(self) -> bool:
        """True if the workflow was running: steps not started never run; running ones finish."""
        return self.app.broker.drive(cancelling(self.app.broker.settings, self.id))

    def retry(self) -> bool:
        """Resume a dead workflow: True if it was dead and runs again, False if it was not dead.

        Its dead steps run again with a fresh set of attempts, the steps its
        death cancelled are planned again (each sent once its predecessors
        succeeded), and its ``on_failure`` step runs again only if it dies
        again. Retrying one of its dead steps (``taskforge dead retry``, the
        dashboard) does the same.
        """
        from .resume import resume

        return self._resumed(resume(self.app.broker, self.id))

    def _resumed(self, reply: ResumeReply) -> bool:
        """What ``retry()`` answers for a resume's reply. An app's after_enqueue callbacks hear of a resume
        as of a ``delay()`` (eager mode then drains)."""
        if reply.before == "gone":
            raise self._missing()
        listeners = getattr(self.app, "after_enqueue", None)  # a TaskForge has them; a bare BrokerAccess may not
        if reply.before == "dead" and reply.replan and listeners is not None:
            index, queue = reply.replan[0]
            announce(listeners, JobHandle(self.app, step_id(self.id, index), queue))
        return reply.before == "dead"

    def result(self, timeout: float | None = None, *, allow_join: bool = False) -> R:
        """Wait for the workflow to end; the last step's result (a list for a group).

        Raises TaskFailed naming the step that ended it dead or cancelled,
        TimeoutError if ``timeout`` seconds pass. Inside a running task, the
        rule of ``JobHandle.result()``: a wait raises RuntimeError unless
        ``allow_join``, and runs the steps first in ``app.drain()``.
        """
        joins.before_waiting(self._join(timeout, allow_join))
        return cast(R, self.app.broker.drive(waiting(self.id, self._time_left(timeout))))

    def get(self, timeout: float | None = None, *, allow_join: bool = False, **celery_options: NoReturn) -> R:
        """``result(timeout)`` under Celery's name: a port's ``chord(...)(...).get()`` keeps working."""
        celery_names.reject_get_options("WorkflowHandle.get()", celery_options)
        return self.result(timeout, allow_join=allow_join)

    async def aget(self, timeout: float | None = None, *, allow_join: bool = False, **celery_options: NoReturn) -> R:
        """``get()``, awaited: ``aresult(timeout)``."""
        celery_names.reject_get_options("WorkflowHandle.aget()", celery_options)
        return await self.aresult(timeout, allow_join=allow_join)

    def _join(self, timeout: float | None, allow_join: bool) -> joins.Join:
        return joins.Join(self.app, f"workflow {self.id}", timeout, allow_join, self._finished, self.status)

    def _finished(self) -> bool:
        return self.status().finished

    if not TYPE_CHECKING:  # hidden from type checkers: a typo stays a static error

        def __getattr__(self, name: str) -> Any:
            """Only for names not found: Celery's (``state``, ``join``...) name the taskforge way."""
            raise celery_names.attribute_error("WorkflowHandle", name, celery_names.WORKFLOW)

    def _time_left(self, timeout: float | None) -> Callable[[WorkflowState], float]:
        """How long the next blocking slice of a wait may be; TimeoutError once ``timeout`` s have passed."""
        deadline = None if timeout is None else time.monotonic() + timeout

        def left(state: WorkflowState) -> float:
            remaining = WAIT_SLICE if deadline is None else deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"workflow {self.id} did not finish within {timeout} s (state: {state})")
            return min(remaining, WAIT_SLICE)

        return left

    def info(self) -> WorkflowInfo:
        return self.app.broker.drive(reading_info(self.id))

    # -- the same, awaited: they never block the event loop ------------------

    async def astatus(self) -> WorkflowState:
        """``status()``, awaited."""
        return await async_access(self.app).async_broker().drive(reading_state(self.id))

    async def acancel(self) -> bool:
        """``cancel()``, awaited."""
        broker = async_access(self.app).async_broker()
        return await broker.drive(cancelling(broker.settings, self.id))

    async def aretry(self) -> bool:
        """``retry()``, awaited."""
        from .resume import aresume

        return self._resumed(await aresume(async_access(self.app).async_broker(), self.id))

    async def aresult(self, timeout: float | None = None, *, allow_join: bool = False) -> R:
        """``result()``, awaited: a blocking pop on the workflow's done list, in slices; the same rule in a task."""
        await joins.abefore_waiting(self._join(timeout, allow_join))
        return cast(R, await async_access(self.app).async_broker().drive(waiting(self.id, self._time_left(timeout))))

    async def ainfo(self) -> WorkflowInfo:
        """``info()``, awaited."""
        return await async_access(self.app).async_broker().drive(reading_info(self.id))
