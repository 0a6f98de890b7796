"""A step's report carried to its workflow, and what follows: the next steps sent, or the rest stopped.

Exactly-once where it matters, with at-least-once parts: a step's final
transition leaves a report in its queue's outbox (same slot, same script);
delivering it runs ``workflow_report`` in the workflow's slot, which counts
each step once; the steps that may go next are sent under fixed ids
(``<workflow>.<index>``), which enqueue stores once; only then is the report
dropped from the outbox. A crash anywhere in between leaves the report in
the outbox, and the reconciler (any worker, with its other housekeeping)
delivers it again: a workflow may be delayed, never hung, never doubled.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from ..broker import job_plans, workflow_plans
from ..broker.plan import Plan, Settings
from ..broker.record import NewJob, encode_headers
from ..broker.workflows import StepReport
from ..serialization import dumps_call, loads, loads_call
from .plan import fill
from .record import StepField, WorkflowField
from .spec import StepSpec

if TYPE_CHECKING:
    from ..broker.replies import StepToSend, WorkflowReply
    from ..broker.roles import BrokerRoles

log = logging.getLogger("taskforge.workflows")

ENDED = ("succeeded", "dead", "cancelled")
INPUT_SLICE = 1_000  # results read per HMGET: well under a millisecond of Redis each


def step_id(workflow: str, index: int) -> str:
    return f"{workflow}.{index}"


def step_index(job_id: str) -> int | None:
    _, _, index = job_id.rpartition(".")
    return int(index) if index.isdigit() else None


def step_job(workflow: str, step: StepToSend, failed: dict[bytes, bytes] | None = None) -> tuple[str, NewJob]:
    """The job of a step whose turn came: its queue, and the job with its inputs before its own args.

    ``failed``: the failed step's record, for an on_failure step built with
    ``.s()`` (``failed_record``), which gets that step's summary first.
    """
    spec = StepSpec.decode(step.spec)
    payload = spec.call
    if spec.input is not None:
        args, kwargs = loads_call(payload)
        given = fill(spec.input, iter(loads(value) for value in step.inputs))
        payload = dumps_call((given, *args), kwargs)
    elif spec.summary:
        args, kwargs = loads_call(payload)
        payload = dumps_call((failure_summary(workflow, step, failed or {}), *args), kwargs)
    job = NewJob(
        id=step_id(workflow, step.step),
        task=spec.task,
        payload=payload,
        priority=spec.priority,
        max_attempts=spec.max_attempts,
        timeout_ms=spec.timeout_ms,
        inherit=spec.inherit,
        limits=spec.limits,
        workflow=workflow,
        fields=step_fields(spec),
    )
    return spec.queue, job


def step_fields(spec: StepSpec) -> dict[str, str] | None:
    """The plain fields a step's record carries: its producer's headers, and its budget of worker losses
    when not the default (the scripts read an absent one as 2), as a job sent on its own would."""
    fields = {"headers": encode_headers(spec.headers)} if spec.headers else {}
    if spec.max_worker_losses != 2:
        fields["max_worker_losses"] = str(spec.max_worker_losses)
    return fields or None


def failed_at(workflow: str, reply: WorkflowReply) -> tuple[str, str] | None:
    """(queue, job id) of the failed step whose summary an on_failure step in ``reply`` may get.

    A dead workflow's ending answers its on_failure step, alone, followed by
    the failed step's index, queue and error (``ending`` in ``lua/lib/workflows.lua``).
    """
    if not (reply.settle and reply.state == "dead" and reply.ready) or len(reply.ready[0].inputs) < 3:
        return None
    index, queue, _ = reply.ready[0].inputs[-3:]
    return (queue.decode(), step_id(workflow, int(index))) if index.isdigit() else None


def failed_record(broker: BrokerRoles, workflow: str, reply: WorkflowReply) -> dict[bytes, bytes] | None:
    """The record of the step that ended ``reply``'s workflow, when it sends an on_failure step."""
    return broker.drive(reading_failed(workflow, reply))


def failure_summary(workflow: str, step: StepToSend, record: dict[bytes, bytes]) -> dict[str, Any]:
    """What an on_failure step built with ``.s()`` receives: the failed step's id, task, error,
    error_type (its exception's class path, None when the record has none) and traceback."""
    index, _, error = step.inputs[-3:] if len(step.inputs) >= 3 else (b"", b"", b"")

    def text(name: str) -> str | None:
        value = record.get(name.encode())
        return value.decode(errors="replace") if value else None

    return {
        "id": step_id(workflow, int(index)) if index.isdigit() else None,
        "task": text("task"),
        "error": text("error") or error.decode(errors="replace") or None,
        "error_type": text("error_type"),
        "traceback": text("traceback"),
    }


def input_slices(listed: bytes | None) -> list[list[str]]:
    """The record's fields holding a step's inputs (its ``input`` field lists them), in slices, in order."""
    names = [StepField.RESULT.at(i.decode()) for i in (listed or b"").split(b",") if i]
    return [names[k : k + INPUT_SLICE] for k in range(0, len(names), INPUT_SLICE)]


def with_inputs(broker: BrokerRoles, workflow: str, step: StepToSend) -> StepToSend:
    """The step with the results the script left in the record (``held``), read a slice per call."""
    return broker.drive(reading_inputs(workflow, step))


def send(
    broker: BrokerRoles, workflow: str, steps: Sequence[StepToSend], failed: dict[bytes, bytes] | None = None
) -> None:
    """Store these steps, each once whoever sends it (their ids are fixed); ``failed``: as ``step_job``."""
    broker.drive(sending(broker.settings, workflow, steps, failed))


def stop(broker: BrokerRoles, workflow: str, steps: Iterable[tuple[int, str]]) -> None:
    """Cancel the steps of an ended workflow that have not started; running ones finish."""
    broker.drive(stopping(broker.settings, workflow, steps))


def act(broker: BrokerRoles, workflow: str, reply: WorkflowReply) -> None:
    """Do what a workflow script answered: send, stop, then settle an ended workflow."""
    broker.drive(acting(broker.settings, workflow, reply))


# -- the moves above, planned once: driven here on redis-py, in aio_delivery.py on redis.asyncio --------


def reading_inputs(workflow: str, step: StepToSend) -> Plan[StepToSend]:
    """``with_inputs``: the inputs' names listed in the record, then their values a slice per call."""
    if not step.held:
        return step
    (listed,) = yield from workflow_plans.workflow_fields(workflow, [StepField.INPUT.at(step.step)])
    values: list[bytes | None] = []
    for names in input_slices(listed):
        values += yield from workflow_plans.workflow_fields(workflow, names)
    return step._replace(inputs=[v or b"" for v in values], held=0)


def reading_failed(workflow: str, reply: WorkflowReply) -> Plan[dict[bytes, bytes] | None]:
    """``failed_record``: read only when ``reply`` sends an on_failure step."""
    where = failed_at(workflow, reply)
    if where is None:
        return None
    return (yield from job_plans.read(*where)) or {}


def sending(
    settings: Settings, workflow: str, steps: Sequence[StepToSend], failed: dict[bytes, bytes] | None = None
) -> Plan[None]:
    """``send``: the steps' jobs built (inputs read first), then one enqueue per queue, each id stored once."""
    by_queue: dict[str, list[NewJob]] = {}
    for step in steps:
        queue, job = step_job(workflow, (yield from reading_inputs(workflow, step)), failed)
        by_queue.setdefault(queue, []).append(job)
    for queue, jobs in by_queue.items():
        yield from job_plans.enqueue(settings, queue, jobs, 0, True)


def stopping(settings: Settings, workflow: str, steps: Iterable[tuple[int, str]]) -> Plan[None]:
    """``stop``: the unstarted steps cancelled, a queue at a time."""
    by_queue: dict[str, list[str]] = {}
    for index, queue in steps:
        if queue:
            by_queue.setdefault(queue, []).append(step_id(workflow, index))
    for queue, ids in by_queue.items():
        yield from workflow_plans.cancel_steps(queue, workflow, ids, settings.retention_ms)


def acting(settings: Settings, workflow: str, reply: WorkflowReply, state: str | None = None) -> Plan[None]:
    """``act``: send, stop, then settle an ended workflow (as ``state`` when given, else as ``reply`` says)."""
    if reply.ready:
        failed = yield from reading_failed(workflow, reply)
        yield from sending(settings, workflow, reply.ready, failed)
    if reply.cancel:
        yield from stopping(settings, workflow, reply.cancel)
    if reply.settle:
        yield from workflow_plans.settle_workflows([(workflow, state or reply.state)], settings.retention_ms)


def deliver(
    broker: BrokerRoles,
    reports: Sequence[StepReport],
    drop: bool = True,
    dropped: Sequence[StepReport] = (),
    listed: Sequence[str] = (),
) -> list[str]:
    """Carry reports to their workflows, send what may go next, then drop the reports.

    A batch costs a few round trips whatever its size: the reports go in one
    pipeline, the steps they free in one enqueue per queue, the drops in one
    pipeline. Sending comes before dropping: a crash in between leaves the
    reports for the reconciler, and sending again stores nothing twice.

    With ``drop`` False (a courier), the reports are left to drop and the
    workflows they made succeed are left to list: both are returned to be
    passed, as ``dropped`` and ``listed``, with the next batch, which then
    does them in its first round trip. Returns the workflows left to list.
    """
    counted = [r for r in reports if r.step >= 0]
    replies = broker.ledger.report_steps(counted, dropped, listed)
    by_queue: dict[str, list[NewJob]] = {}
    for report, reply in zip(counted, replies, strict=True):
        failed = failed_record(broker, report.workflow, reply)
        for step in reply.ready:
            queue, job = step_job(report.workflow, with_inputs(broker, report.workflow, step), failed)
            by_queue.setdefault(queue, []).append(job)
    for queue, jobs in by_queue.items():
        broker.jobs.enqueue(queue, jobs, resend=True)
    for report, reply in zip(counted, replies, strict=True):
        if reply.cancel:  # rare: a workflow ended with steps in flight
            stop(broker, report.workflow, reply.cancel)
    ended = [(report.workflow, reply.state) for report, reply in zip(counted, replies, strict=True) if reply.settle]
    succeeded = [workflow for workflow, state in ended if state == "succeeded"]
    broker.ledger.settle_workflows([(w, state) for w, state in ended if drop or state != "succeeded"])
    if drop:
        broker.ledger.delivered(reports)
        return []
    return succeeded


def report_of(queue: str, job_id: str, workflow: str, state: str, result: bytes = b"", error: str = "") -> StepReport:
    """A report as the outbox names it; a job id that is no step of ours counts for nothing (step -1)."""
    index = step_index(job_id)
    return StepReport(queue, job_id, workflow, -1 if index is None else index, state, result, error)


def deliver_if_step(broker: BrokerRoles, queue: str, job_id: str) -> None:
    """After a final transition made outside a lane (a cancel, an abort, a crash the supervisor
    settled): a workflow's step tells its workflow now, not at the reconciler's next pass."""
    if step_index(job_id) is None:
        return
    try:
        fields = broker.jobs.read(queue, job_id) or {}
        workflow = fields.get(b"workflow")
        if workflow and (fields.get(b"state") or b"").decode() in ENDED:
            deliver_from_record(broker, queue, job_id, workflow.decode())
    except Exception as exc:  # the reconciler delivers it
        log.warning("the report of step %s waits for the reconciler (%s)", job_id, exc)


def deliver_from_record(broker: BrokerRoles, queue: str, job_id: str, workflow: str) -> None:
    """Deliver a report left in the outbox, reading the outcome from the step's record."""
    fields = broker.jobs.read(queue, job_id) or {}
    state = (fields.get(b"state") or b"").decode(errors="replace")
    result = fields.get(b"result") or b""
    error = (fields.get(b"error") or b"").decode(errors="replace")
    if state not in ENDED:
        if fields:  # retried (its workflow resumed, or not a dead one): it will report again when it ends
            broker.ledger.delivered([report_of(queue, job_id, workflow, state)])
            return
        state, error = "dead", "WorkflowStepLost: the step's record expired before its outcome was delivered"
    deliver(broker, [report_of(queue, job_id, workflow, state, result, error)])


DONE = {state.encode() for state in ENDED}


def audit(broker: BrokerRoles, workflow: str) -> int:
    """Take up what nobody will of one workflow running for a while (the reconciler's audit, a slice at a time).

    The outbox covers a crash; it cannot cover a write Redis itself lost:
    with asynchronous replication a failover may drop a step's report after
    its outbox entry was dropped, or a step stored by the report's sender.
    So a step in flight whose record says it ended is delivered again, one
    not stored at all is sent again, and a workflow that ended but is still
    listed as running is settled: the same idempotent work again. Returns
    how many steps (or settlings) it took up.
    """
    flight = broker.ledger.workflow_flight(workflow)
    if flight.state == "gone":
        broker.ledger.settle_workflow(workflow, "gone")  # expired: off the running list
        return 0
    if flight.state != "running":  # ended, its settling lost: any step's report settles it
        [failed] = broker.ledger.workflow_fields(workflow, [WorkflowField.FAILED_STEP.value])
        index = int(failed) if failed else 0
        [queue] = broker.ledger.workflow_fields(workflow, [StepField.QUEUE.at(index)])
        deliver_from_record(broker, queue.decode() if queue else "", step_id(workflow, index), workflow)
        broker.ledger.settle_workflow(workflow, flight.state)  # listed under its final state, whoever settled it
        return 1
    steps = [(StepSpec.decode(entry.spec).queue, step_id(workflow, entry.step)) for entry in flight.ready]
    records = broker.ledger.step_records(steps)
    unsent = [entry for entry, record in zip(flight.ready, records, strict=True) if not record]
    if unsent:
        send(broker, workflow, unsent)
    ended = [(q, j) for (q, j), record in zip(steps, records, strict=True) if record.get(b"state") in DONE]
    for step_queue, job_id in ended:
        deliver_from_record(broker, step_queue, job_id, workflow)
    if unsent or ended:
        log.warning("workflow %s: took up %d steps nobody would have", workflow, len(unsent) + len(ended))
    return len(unsent) + len(ended)
