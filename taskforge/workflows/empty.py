"""A workflow of no step (``group().delay()``): succeeded at once, with its empty result, and stored nowhere.

Celery's and Dramatiq's empty groups succeed with an empty list, and a batch
over zero items should not fail a report. A workflow with no step has no
task, so no app and no Redis to be stored in: its handle answers every
question itself (``result()`` is ``[]``, or ``[[]]`` for a group of empty
groups). ``app.workflow(id)`` of its id raises ``WorkflowNotFound``, as for
a workflow past its retention. A chain or a chord with at least one step
is stored as usual; an empty group in it passes on ``[]`` (``Group.place``).
"""

from __future__ import annotations

import uuid
from datetime import datetime, timezone
from typing import Any, TypeVar, cast

from .following import WorkflowInfo, WorkflowState
from .handle import WorkflowHandle
from .plan import Plan, fill

R = TypeVar("R")


class EmptyWorkflow(WorkflowHandle[R]):
    """The handle of a workflow that had nothing to run: succeeded, its result known when it was made."""

    def __init__(self, plan: Plan) -> None:
        self.app = cast(Any, None)  # no step, so no app: nothing here reads Redis
        self.id = uuid.uuid4().hex
        self._result = cast(R, fill(plan.result, iter(())))
        self._at = datetime.now(timezone.utc)

    def __repr__(self) -> str:
        return f"<WorkflowHandle {self.id} (no step: succeeded)>"

    def status(self) -> WorkflowState:
        return WorkflowState.SUCCEEDED

    def info(self) -> WorkflowInfo:
        return WorkflowInfo(self.id, WorkflowState.SUCCEEDED, self._at, self._at, None)

    def result(self, timeout: float | None = None, *, allow_join: bool = False) -> R:
        return self._result  # nothing to wait for, so no worker slot held waiting: allowed inside a task

    def cancel(self) -> bool:
        return False  # finished already, as cancel() of any finished workflow answers

    def retry(self) -> bool:
        return False  # not dead

    async def astatus(self) -> WorkflowState:
        return self.status()

    async def ainfo(self) -> WorkflowInfo:
        return self.info()

    async def aresult(self, timeout: float | None = None, *, allow_join: bool = False) -> R:
        return self._result

    async def acancel(self) -> bool:
        return False

    async def aretry(self) -> bool:
        return False
