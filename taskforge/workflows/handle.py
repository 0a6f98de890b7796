"""``WorkflowHandle``: what ``chain(...).delay()`` returns and ``app.workflow(id)`` rebuilds elsewhere."""

from __future__ import annotations

import enum
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, NoReturn, TypeVar, cast

from .. import celery_names
from ..broker.keys import WorkflowKeys
from ..broker.record import Field, error_type_of, job_info
from ..errors import CorruptPayload, TaskFailed, WorkflowNotFound
from ..handle import JobHandle, async_access
from ..job import FailureKind, JobInfo, JobState, Priority, ms_to_datetime
from ..sending import announce
from ..serialization import loads
from .aio_delivery import aact
from .delivery import step_id, stop
from .plan import fill, leaves
from .record import StepField, WorkflowField
from .spec import StepSpec

if TYPE_CHECKING:
    from datetime import datetime

    from ..broker.replies import ResumeReply
    from ..protocols import BrokerAccess
    from .plan import Shape

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
        return WorkflowNotFound(
            f"no workflow {self.id}: it never existed, or it ended longer ago than the app's retention"
        )

    def _record(self) -> dict[bytes, bytes]:
        fields = self.app.broker.ledger.read_workflow(self.id)
        if fields is None:
            raise self._missing()
        return fields

    def status(self) -> WorkflowState:
        [state] = self.app.broker.ledger.workflow_fields(self.id, [WorkflowField.STATE.value])
        if state is None:
            self._record()  # raises WorkflowNotFound
        return state_of(self.id, state)

    def cancel(self) -> bool:
        """True if the workflow was running: steps not started never run; running ones finish."""
        broker = self.app.broker
        reply = broker.ledger.cancel_workflow(self.id)
        if reply.state == "gone":
            self._record()
        if reply.cancel:
            stop(broker, self.id, reply.cancel)
        if reply.settle:
            broker.ledger.settle_workflow(self.id, "cancelled" if reply.was_running else reply.state)
        return reply.was_running

    def retry(self) -> bool:
        """Resume a dead workflow: True if it was dead and runs again, False if it was not dead.

        Its dead steps run again with a fresh set of attempts, the steps its
        death cancelled are planned again (each sent once its predecessors
        succeeded), and its ``on_failure`` step runs again only if it dies
        again. Retrying one of its dead steps (``taskforge dead retry``, the
        dashboard) does the same.
        """
        from .resume import resume

        reply = resume(self.app.broker, self.id)
        if reply.before == "gone":
            raise self._missing()
        self._sent_again(reply)
        return reply.before == "dead"

    def _sent_again(self, reply: ResumeReply) -> None:
        """An app's after_enqueue callbacks hear of a resume as of a ``delay()`` (eager mode then drains)."""
        listeners = getattr(self.app, "after_enqueue", None)  # a TaskForge has them; a bare BrokerAccess may not
        if reply.before == "dead" and reply.replan and listeners is not None:
            index, queue = reply.replan[0]
            announce(listeners, JobHandle(self.app, step_id(self.id, index), queue))

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
                fields = self._record()
                where = failed_step(self.id, fields)
                return cast(R, outcome(self.id, fields, (broker.jobs.read(*where) or {}) if where else {}))
            broker.ledger.wait_workflow(self.id, self._time_left(deadline, timeout, state))

    def get(self, timeout: float | None = None, **celery_options: NoReturn) -> R:
        """``result(timeout)`` under Celery's name: a port's ``chord(...)(...).get()`` keeps working."""
        celery_names.reject_get_options("WorkflowHandle.get()", celery_options)
        return self.result(timeout)

    async def aget(self, timeout: float | None = None, **celery_options: NoReturn) -> R:
        """``get()``, awaited: ``aresult(timeout)``."""
        celery_names.reject_get_options("WorkflowHandle.aget()", celery_options)
        return await self.aresult(timeout)

    if not TYPE_CHECKING:  # hidden from type checkers: a typo stays a static error

        def __getattr__(self, name: str) -> Any:
            """Only for names not found: Celery's (``state``, ``join``...) name the taskforge way."""
            raise celery_names.attribute_error("WorkflowHandle", name, celery_names.WORKFLOW)

    def _time_left(self, deadline: float | None, timeout: float | None, state: WorkflowState) -> float:
        remaining = WAIT_SLICE if deadline is None else deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError(f"workflow {self.id} did not finish within {timeout} s (state: {state})")
        return min(remaining, WAIT_SLICE)

    def info(self) -> WorkflowInfo:
        fields = self._record()
        with damaged_record(self.id):
            return build_info(self.id, fields, self.app.broker.ledger.step_records(steps_of(self.id, fields)))

    # -- the same, awaited: they never block the event loop ------------------

    async def astatus(self) -> WorkflowState:
        """``status()``, awaited."""
        broker = async_access(self.app).async_broker()
        [state] = await broker.ledger.workflow_fields(self.id, [WorkflowField.STATE.value])
        if state is None:
            await self._arecord()
        return state_of(self.id, state)

    async def _arecord(self) -> dict[bytes, bytes]:
        fields = await async_access(self.app).async_broker().ledger.read_workflow(self.id)
        if fields is None:
            raise self._missing()
        return fields

    async def acancel(self) -> bool:
        """``cancel()``, awaited."""
        broker = async_access(self.app).async_broker()
        reply = await broker.ledger.cancel_workflow(self.id)
        if reply.state == "gone":
            await self._arecord()
        await aact(broker, self.id, reply._replace(ready=[]), "cancelled" if reply.was_running else None)
        return reply.was_running

    async def aretry(self) -> bool:
        """``retry()``, awaited."""
        from .resume import aresume

        reply = await aresume(async_access(self.app).async_broker(), self.id)
        if reply.before == "gone":
            raise self._missing()
        self._sent_again(reply)
        return reply.before == "dead"

    async def aresult(self, timeout: float | None = None) -> R:
        """``result()``, awaited: a blocking pop on the workflow's done list, in slices."""
        deadline = None if timeout is None else time.monotonic() + timeout
        broker = async_access(self.app).async_broker()
        while True:
            state = await self.astatus()
            if state.finished:
                fields = await self._arecord()
                where = failed_step(self.id, fields)
                return cast(R, outcome(self.id, fields, (await broker.jobs.read(*where) or {}) if where else {}))
            await broker.ledger.wait_workflow(self.id, self._time_left(deadline, timeout, state))

    async def ainfo(self) -> WorkflowInfo:
        """``info()``, awaited."""
        fields = await self._arecord()
        with damaged_record(self.id):
            records = await async_access(self.app).async_broker().ledger.step_records(steps_of(self.id, fields))
            return build_info(self.id, fields, records)


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
