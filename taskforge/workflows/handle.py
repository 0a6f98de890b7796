"""``WorkflowHandle``: what ``chain(...).delay()`` returns and ``app.workflow(id)`` rebuilds elsewhere."""

from __future__ import annotations

import enum
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from ..broker.record import job_info
from ..errors import TaskFailed, WorkflowNotFound
from ..job import FailureKind, JobInfo, JobState, Priority, ms_to_datetime
from ..serialization import loads
from .delivery import step_id, stop
from .plan import fill, leaves

if TYPE_CHECKING:
    from datetime import datetime

    from ..protocols import BrokerAccess

R = TypeVar("R")
WAIT_SLICE = 2.0  # as JobHandle.result: block on Redis in slices well under the socket timeout


class WorkflowState(str, enum.Enum):
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    DEAD = "dead"
    CANCELLED = "cancelled"

    @property
    def finished(self) -> bool:
        return self is not WorkflowState.RUNNING

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class WorkflowInfo:
    """A snapshot of a workflow: its state and every step's ``JobInfo``, in workflow order."""

    id: str
    state: WorkflowState
    created_at: datetime | None
    finished_at: datetime | None
    error: str | None
    steps: list[JobInfo] = field(default_factory=list)
    failed_step: str | None = None  # the job id of the step that ended it, when one did
    on_failure: str | None = None  # the job id of its on_failure step, when it has one (listed once sent)

    @property
    def holding_step(self) -> JobInfo | None:
        """The step the workflow waits on: the one that ended it, else (running) the first not succeeded.

        "Not succeeded" rather than "not finished": a step that just went dead
        holds the workflow up before its report has ended the workflow.
        """
        if self.failed_step is not None:
            return next((step for step in self.steps if step.id == self.failed_step), None)
        if self.state is not WorkflowState.RUNNING:
            return None
        return next((step for step in self.steps if step.state is not JobState.SUCCEEDED), None)

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly form with the field names of ``WorkflowInfo`` (``workflow --json``)."""
        return {
            "id": self.id,
            "state": self.state.value,
            "created_at": self.created_at.isoformat() if self.created_at else None,
            "finished_at": self.finished_at.isoformat() if self.finished_at else None,
            "error": self.error,
            "failed_step": self.failed_step,
            "on_failure": self.on_failure,
            "steps": [step.to_dict() for step in self.steps],
        }


def _text(fields: dict[bytes, bytes], name: str) -> str | None:
    value = fields.get(name.encode())
    return value.decode(errors="replace") if value else None


def _int(fields: dict[bytes, bytes], name: str) -> int | None:
    value = _text(fields, name)
    return int(value) if value and value.isdigit() else None


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

    def _record(self) -> dict[bytes, bytes]:
        fields = self.app.broker.read_workflow(self.id)
        if fields is None:
            raise WorkflowNotFound(
                f"no workflow {self.id}: it never existed, or it ended longer ago than the app's retention"
            )
        return fields

    def status(self) -> WorkflowState:
        [state] = self.app.broker.workflow_fields(self.id, ["state"])
        if state is None:
            self._record()  # raises WorkflowNotFound
        return WorkflowState((state or b"running").decode())

    def cancel(self) -> bool:
        """True if the workflow was running: steps not started never run; running ones finish."""
        broker = self.app.broker
        reply = broker.cancel_workflow(self.id)
        if reply.state == "gone":
            self._record()
        if reply.cancel:
            stop(broker, self.id, reply.cancel)
        if reply.settle:
            broker.settle_workflow(self.id, "cancelled" if reply.was_running else reply.state)
        return reply.was_running

    def result(self, timeout: float | None = None) -> R:
        """Wait for the workflow to end; the last step's result (a list for a group).

        Raises TaskFailed naming the step that ended it dead or cancelled,
        TimeoutError if ``timeout`` seconds pass.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        broker = self.app.broker
        while True:
            state = self.status()
            if state.finished:
                return self._outcome(self._record())
            remaining = WAIT_SLICE if deadline is None else deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"workflow {self.id} did not finish within {timeout} s (state: {state})")
            broker.wait_workflow(self.id, min(remaining, WAIT_SLICE))

    def _outcome(self, fields: dict[bytes, bytes]) -> R:
        state = WorkflowState(_text(fields, "state") or "running")
        if state is WorkflowState.SUCCEEDED:
            shape = loads(fields[b"shape"])
            values = (loads(fields[f"result:{i}".encode()]) for i in leaves(shape))  # type: ignore[arg-type]
            return fill(shape, values)  # type: ignore[arg-type, no-any-return]
        failed = _int(fields, "failed_step")
        error = _text(fields, "error")
        if failed is None:
            raise TaskFailed(self.id, state.value, error, None, None, task="(workflow)")
        job = step_id(self.id, failed)
        spec: dict[str, Any] = loads(fields[f"spec:{failed}".encode()])  # type: ignore[assignment]
        record = self.app.broker.read(spec["queue"], job) or {}
        kind = FailureKind.decode(_text(record, "failure"))
        raise TaskFailed(job, state.value, error, _text(record, "traceback"), kind, task=spec["task"])

    def info(self) -> WorkflowInfo:
        fields = self._record()
        state = WorkflowState(_text(fields, "state") or "running")
        count = _int(fields, "steps") or 0
        on_failure = _int(fields, "on_failure")
        indices = list(range(count)) + ([on_failure] if on_failure is not None else [])
        specs = [loads(fields[f"spec:{i}".encode()]) for i in indices]
        ids = [step_id(self.id, i) for i in indices]
        records = self.app.broker.step_records([(s["queue"], j) for s, j in zip(specs, ids, strict=True)])  # type: ignore[index]
        steps = []
        for index, spec, job, record in zip(indices, specs, ids, records, strict=True):
            if record:
                steps.append(job_info(job, spec["queue"], record))  # type: ignore[index]
            elif index != on_failure:  # not sent (yet): listed all the same
                steps.append(unsent_step(job, spec, state))  # type: ignore[arg-type]
        failed = _int(fields, "failed_step")
        return WorkflowInfo(
            id=self.id,
            state=state,
            created_at=ms_to_datetime(_int(fields, "created_at")),
            finished_at=ms_to_datetime(_int(fields, "finished_at")),
            error=_text(fields, "error"),
            steps=steps,
            failed_step=None if failed is None else step_id(self.id, failed),
            on_failure=None if on_failure is None else step_id(self.id, on_failure),
        )


def unsent_step(job_id: str, spec: dict[str, Any], state: WorkflowState) -> JobInfo:
    """A step not stored yet: pending while the workflow runs, cancelled once it ended."""
    from ..serialization import loads_call

    args, kwargs = loads_call(spec["call"])
    return JobInfo(
        id=job_id,
        task=spec["task"],
        queue=spec["queue"],
        args=args,
        kwargs=kwargs,
        priority=Priority(spec["priority"]),
        state=JobState.PENDING if state is WorkflowState.RUNNING else JobState.CANCELLED,
        attempts=0,
        max_attempts=spec["max_attempts"],
        created_at=None,
        scheduled_at=None,
        started_at=None,
        finished_at=None,
    )
