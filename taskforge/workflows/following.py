"""Following a workflow: what its record says (state, outcome, info), and the plans that read it,
wait on it and cancel it, which ``WorkflowHandle`` drives on redis-py or on an event loop.

Each plan (``broker/plan.py``) is the ledger's and the job role's own plans
put together, so ``status()`` and ``astatus()``, ``result()`` and
``aresult()``, ``cancel()`` and ``acancel()`` send the same commands in the
same order.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from ..broker import job_plans, workflow_plans
from ..broker.keys import WorkflowKeys
from ..broker.plan import Plan, Settings
from ..broker.record import Field, error_type_of, job_info
from ..errors import CorruptPayload, TaskFailed, WorkflowNotFound
from ..job import FailureKind, JobInfo, JobState, Priority, ms_to_datetime
from ..serialization import loads
from .delivery import acting, step_id
from .plan import fill, leaves
from .record import StepField, WorkflowField
from .spec import StepSpec

if TYPE_CHECKING:
    from datetime import datetime

    from .plan import Shape


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
        if self.failed_step is not None:  # never a step that succeeded since: it holds nothing up
            failed = next((step for step in self.steps if step.id == self.failed_step), None)
            return failed if failed is not None and failed.state is not JobState.SUCCEEDED else None
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


def _text(fields: dict[bytes, bytes], name: WorkflowField) -> str | None:
    value = fields.get(name.key)
    return value.decode(errors="replace") if value else None


def _text_of(record: dict[bytes, bytes], name: Field) -> str | None:
    """A field of a step's job record (``broker/record.py``), as text."""
    value = record.get(name.key)
    return value.decode(errors="replace") if value else None


def _int(fields: dict[bytes, bytes], name: WorkflowField) -> int | None:
    value = _text(fields, name)
    return int(value) if value and value.isdigit() else None


def state_of(workflow: str, raw: bytes | None) -> WorkflowState:
    """The state a workflow's record holds; junk raises ``CorruptPayload`` naming the record (a wait on it would
    never end)."""
    with damaged_record(workflow):
        return WorkflowState((raw or b"running").decode())


@contextmanager
def damaged_record(workflow: str) -> Iterator[None]:
    """A record taskforge never wrote (junk state, spec, counts) as one ``CorruptPayload`` naming its key."""
    try:
        yield
    except (ValueError, KeyError, TypeError, IndexError) as exc:
        raise CorruptPayload(
            f"the workflow record {WorkflowKeys(workflow).record} holds what taskforge never writes "
            f"({type(exc).__name__}: {str(exc)[:120]}): inspect it with redis-cli HGETALL"
        ) from None


def failed_step(workflow: str, fields: dict[bytes, bytes]) -> tuple[str, str] | None:
    """(queue, job id) of the step that ended the workflow, when one did."""
    failed = _int(fields, WorkflowField.FAILED_STEP)
    if failed is None or _state(fields) is WorkflowState.SUCCEEDED:
        return None
    return spec_at(fields, failed).queue, step_id(workflow, failed)


def spec_at(fields: dict[bytes, bytes], index: int) -> StepSpec:
    """Step ``index``'s spec, from its workflow's record."""
    return StepSpec.decode(fields[StepField.SPEC.key(index)])


def _state(fields: dict[bytes, bytes]) -> WorkflowState:
    return WorkflowState(_text(fields, WorkflowField.STATE) or "running")


def outcome(workflow: str, fields: dict[bytes, bytes], record: dict[bytes, bytes]) -> Any:
    """An ended workflow's result, or its TaskFailed; ``record``: the failed step's job record, if any."""
    state = _state(fields)
    if state is WorkflowState.SUCCEEDED:
        shape = cast("Shape", loads(fields[WorkflowField.SHAPE.key]))
        return fill(shape, (loads(fields[StepField.RESULT.key(i)]) for i in leaves(shape)))
    failed = _int(fields, WorkflowField.FAILED_STEP)
    error = _text(fields, WorkflowField.ERROR)
    if failed is None:
        raise TaskFailed(workflow, state.value, error, None, None, task="(workflow)")
    job = step_id(workflow, failed)
    kind = FailureKind.decode(_text_of(record, Field.FAILURE))
    error_type = error_type_of(record, kind)  # Celery ports catch by it around a workflow's result too
    task = spec_at(fields, failed).task
    raise TaskFailed(job, state.value, error, _text_of(record, Field.TRACEBACK), kind, task, error_type)


def _indices(fields: dict[bytes, bytes]) -> list[int]:
    count = _int(fields, WorkflowField.STEPS) or 0
    on_failure = _int(fields, WorkflowField.ON_FAILURE)
    return list(range(count)) + ([on_failure] if on_failure is not None else [])


def steps_of(workflow: str, fields: dict[bytes, bytes]) -> list[tuple[str, str]]:
    """(queue, job id) of every step, on_failure last: the records ``info()`` reads."""
    return [(spec_at(fields, i).queue, step_id(workflow, i)) for i in _indices(fields)]


def build_info(workflow: str, fields: dict[bytes, bytes], records: list[dict[bytes, bytes]]) -> WorkflowInfo:
    """A ``WorkflowInfo`` from the record and its steps' records (in ``steps_of`` order)."""
    state = _state(fields)
    on_failure = _int(fields, WorkflowField.ON_FAILURE)
    steps = []
    for index, record in zip(_indices(fields), records, strict=True):
        spec = spec_at(fields, index)
        job = step_id(workflow, index)
        if record:
            steps.append(job_info(job, spec.queue, record))
        elif index != on_failure:  # not sent (yet): listed all the same
            steps.append(unsent_step(job, spec, state))
    failed = _int(fields, WorkflowField.FAILED_STEP)
    return WorkflowInfo(
        id=workflow,
        state=state,
        created_at=ms_to_datetime(_int(fields, WorkflowField.CREATED_AT)),
        finished_at=ms_to_datetime(_int(fields, WorkflowField.FINISHED_AT)),
        error=_text(fields, WorkflowField.ERROR),
        steps=steps,
        failed_step=None if failed is None else step_id(workflow, failed),
        on_failure=None if on_failure is None else step_id(workflow, on_failure),
    )


def unsent_step(job_id: str, spec: StepSpec, state: WorkflowState) -> JobInfo:
    """A step not stored yet: pending while the workflow runs, cancelled once it ended."""
    from ..serialization import loads_call

    args, kwargs = loads_call(spec.call)
    return JobInfo(
        id=job_id,
        task=spec.task,
        queue=spec.queue,
        args=args,
        kwargs=kwargs,
        priority=Priority(spec.priority),
        state=JobState.PENDING if state is WorkflowState.RUNNING else JobState.CANCELLED,
        attempts=0,
        max_attempts=spec.max_attempts,
        created_at=None,
        scheduled_at=None,
        started_at=None,
        finished_at=None,
    )


def missing(workflow: str) -> WorkflowNotFound:
    return WorkflowNotFound(
        f"no workflow {workflow}: it never existed, or it ended longer ago than the app's retention"
    )


def reading_record(workflow: str) -> Plan[dict[bytes, bytes]]:
    """The workflow's record; ``WorkflowNotFound`` when there is none."""
    fields = yield from workflow_plans.read_workflow(workflow)
    if fields is None:
        raise missing(workflow)
    return fields


def reading_state(workflow: str) -> Plan[WorkflowState]:
    """The workflow's state, one field read (the whole record only to tell a missing workflow)."""
    [state] = yield from workflow_plans.workflow_fields(workflow, [WorkflowField.STATE.value])
    if state is None:
        yield from reading_record(workflow)  # raises WorkflowNotFound
    return state_of(workflow, state)


def reading_info(workflow: str) -> Plan[WorkflowInfo]:
    """The record, then every step's record in one pipeline."""
    fields = yield from reading_record(workflow)
    with damaged_record(workflow):
        records = yield from workflow_plans.read_step_records(steps_of(workflow, fields))
        return build_info(workflow, fields, records)


def waiting(workflow: str, time_left: Callable[[WorkflowState], float]) -> Plan[Any]:
    """The workflow's outcome once it ends, blocking on its done list a slice at a time (``time_left``
    says how long the next slice may be, and raises ``TimeoutError`` when none is left)."""
    while True:
        state = yield from reading_state(workflow)
        if state.finished:
            fields = yield from reading_record(workflow)
            where = failed_step(workflow, fields)
            failed = ((yield from job_plans.read(*where)) or {}) if where else {}
            return outcome(workflow, fields, failed)
        yield from workflow_plans.wait_workflow(workflow, time_left(state))


def cancelling(settings: Settings, workflow: str) -> Plan[bool]:
    """Cancel the workflow: its unstarted steps stopped, it settled; True when it was running."""
    reply = yield from workflow_plans.cancel_workflow(workflow, settings.retention_ms)
    if reply.state == "gone":
        yield from reading_record(workflow)  # raises WorkflowNotFound
    yield from acting(settings, workflow, reply._replace(ready=[]), "cancelled" if reply.was_running else None)
    return reply.was_running
