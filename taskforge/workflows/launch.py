"""``delay()`` of a chain or a group: check every step, store the workflow, send its first steps.

Every step is serialized and checked against its task before anything is
stored, so a bad argument anywhere stores nothing. The record comes before
the first steps (a fast first step reports to a workflow that exists), and
the "launching" mark before the record (``WorkflowStore.create_workflow``): a
producer that dies in between leaves work for the reconciler, never a
workflow that waits forever. A big workflow's record is staged in pieces and
committed in one call (``broker/workflow_pieces.py``), and its first steps
go as a sliced enqueue (``broker/batches.py``): no call holds Redis long.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from ..broker import workflow_plans
from ..broker.keys import WORKFLOW_LAUNCHING
from ..broker.plan import Plan as Moves
from ..broker.plan import Settings
from ..broker.replies import StepToSend
from ..building import check_size
from ..errors import ConfigurationError, SerializationError
from ..handle import JobHandle
from ..sending import Outgoing, announce, around
from ..serialization import dumps, dumps_call
from .delivery import sending, step_id
from .empty import EmptyWorkflow
from .handle import WorkflowHandle
from .plan import Plan, Shape, leaves, make_plan
from .record import StepField, WorkflowField
from .spec import StepSpec

if TYPE_CHECKING:
    from ..protocols import Producer
    from ..task import Task
    from .canvas import Node, Signature


def step_spec(signature: Signature[Any], given: Shape | None, where: str, summary: bool = False) -> StepSpec:
    """What the workflow record keeps to send a step later (``spec.py``).

    ``summary``: an on_failure step built with ``.s()``, which receives the
    failed step's summary before its own args (``delivery.failure_summary``).
    """
    task: Task[Any, Any] = signature.task
    args, kwargs = signature.args, signature.kwargs
    try:
        payload = dumps_call(args, kwargs)
    except SerializationError as exc:
        raise SerializationError(f"{where} ({task.name}): {exc}; nothing was stored") from None
    try:
        task.check_call((None, *args) if given is not None or summary else args, kwargs)
    except TypeError as exc:
        hint = " (built with .s(), it gets the failed step's summary first: use .si(...) to pass nothing)"
        message = f"{where}: {exc}".replace("the job was not", "the workflow was not")
        raise TypeError(message + (hint if summary else "")) from None
    check_size(task, payload, "")
    opts = task.options
    if opts.job_id is not None or opts.expires is not None or opts.retry_set_per_call:
        raise ConfigurationError(
            f"{where} ({task.name}): job_id, expires and per-call retry filters are not for workflow steps "
            "(a step's id is fixed by its workflow, and a step that expired would hold its workflow up)"
        )
    return StepSpec(
        task=task.name,
        queue=opts.queue,
        priority=int(opts.priority),
        max_attempts=opts.max_attempts,
        timeout_ms=None if opts.timeout is None else int(opts.timeout * 1000),
        limits=opts.limit_text,
        inherit=not task.registered,
        call=payload,
        input=given,
        summary=summary,
        max_worker_losses=opts.max_worker_losses,
    )


def record_fields(plan: Plan, on_failure: Signature[Any] | None) -> list[tuple[str, bytes | str]]:
    """The record ``workflow_create`` stores (``record.py``), every step checked first (``step_spec``)."""
    fields: list[tuple[str, bytes | str]] = [
        (WorkflowField.STEPS.value, str(len(plan.steps))),
        (WorkflowField.SHAPE.value, dumps(plan.result)),
    ]
    for index, step in enumerate(plan.steps):
        fields.append((StepField.SPEC.at(index), step_spec(step.signature, step.input, f"step {index}").encode()))
        fields.append((StepField.QUEUE.at(index), step.signature.task.queue))
        if step.next:
            fields.append((StepField.NEXT.at(index), ",".join(map(str, step.next))))
        if step.after:
            fields.append((StepField.AFTER.at(index), ",".join(map(str, step.after))))
        if step.input is not None:
            fields.append((StepField.INPUT.at(index), ",".join(map(str, leaves(step.input)))))
    if on_failure is not None:
        index = len(plan.steps)
        spec = step_spec(on_failure, None, "on_failure", not on_failure.immutable)
        fields.append((StepField.SPEC.at(index), spec.encode()))
        fields.append((StepField.QUEUE.at(index), on_failure.task.queue))
        fields.append((WorkflowField.ON_FAILURE.value, str(index)))
    return fields


def with_headers(fields: list[tuple[str, bytes | str]], headers: dict[str, str]) -> list[tuple[str, bytes | str]]:
    """The record's fields with ``headers`` (from producer hooks) in every step's spec, so each
    step carries those its workflow was started with, whichever worker sends it."""
    if not headers:
        return fields
    spec = StepField.SPEC.value + ":"
    return [
        (name, StepSpec.decode(value).with_headers(headers).encode())
        if name.startswith(spec) and isinstance(value, bytes)
        else (name, value)
        for name, value in fields
    ]


def first_steps(fields: list[tuple[str, bytes | str]], roots: list[int]) -> list[StepToSend]:
    """The roots as ``workflow_flight`` would answer them (their specs as stored, no inputs),
    read from the fields just stored: a group of 100,000 needs no call to read them back."""
    specs = dict(fields)
    return [StepToSend(i, cast(bytes, specs[StepField.SPEC.at(i)]), []) for i in roots]


def outgoing(workflow: str, first: Task[Any, Any], plan: Plan) -> Outgoing:
    """A workflow's start as producer hooks see it: named by its first step, listing every step's id."""
    return Outgoing("workflow", first.name, first.queue, tuple(step_id(workflow, i) for i in range(len(plan.steps))))


class Launch:
    """A workflow checked and recorded, not yet stored: what the sync and the async launch share."""

    def __init__(self, plan: Plan, on_failure: Signature[Any] | None, broker_of: Callable[[Any], object]) -> None:
        self.plan = plan
        self.app: Producer = plan.steps[0].signature.task.app  # the first step, depth-first
        self.fields = record_fields(plan, on_failure)
        if len({id(broker_of(step.signature.task.app)) for step in plan.steps}) > 1:
            raise ConfigurationError("a workflow's steps must all belong to apps on the same Redis")
        self.workflow = uuid.uuid4().hex
        self.roots = [i for i, step in enumerate(plan.steps) if not step.after]
        self.first: Task[Any, Any] = plan.steps[self.roots[0]].signature.task

    def outgoing(self) -> Outgoing:
        return outgoing(self.workflow, self.first, self.plan)

    def storing(self, settings: Settings, headers: dict[str, str]) -> Moves[None]:
        """The writes, in order: the launching mark and the record, the first steps, the mark dropped;
        a producer stopped in between leaves the mark for the reconciler."""
        stored = with_headers(self.fields, headers)
        yield from workflow_plans.create_workflow(self.workflow, len(self.plan.steps), stored, settings.url)
        yield from sending(settings, self.workflow, first_steps(stored, self.roots))
        yield from workflow_plans.unmark(WORKFLOW_LAUNCHING, self.workflow)

    def started(self) -> WorkflowHandle[Any]:
        """Its handle, once stored; eager mode runs the workflow here, when the testing kit installed it."""
        announce(self.app.after_enqueue, JobHandle(self.app, f"{self.workflow}.{self.roots[0]}", self.first.queue))
        return WorkflowHandle(self.app, self.workflow)


def launch(root: Node, on_failure: Signature[Any] | None) -> WorkflowHandle[Any]:
    """Store and start ``root``; a workflow of no step (an empty group) is finished at once (``empty.py``)."""
    plan = make_plan(root)
    return _launch(plan, on_failure) if plan.steps else EmptyWorkflow(plan)


def _launch(plan: Plan, on_failure: Signature[Any] | None) -> WorkflowHandle[Any]:
    launching = Launch(plan, on_failure, lambda app: app.broker)
    with around(launching.app.send_hooks, launching.outgoing()) as headers:
        launching.app.broker.drive(launching.storing(launching.app.broker.settings, headers))
    return launching.started()
