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

from ..broker.record import NewJob
from ..serialization import dumps_call, loads, loads_call
from .plan import fill

if TYPE_CHECKING:
    from ..broker.queue import Broker
    from ..broker.replies import StepToSend, WorkflowReply

log = logging.getLogger("taskforge.workflows")

ENDED = ("succeeded", "dead", "cancelled")


def step_id(workflow: str, index: int) -> str:
    return f"{workflow}.{index}"


def step_index(job_id: str) -> int | None:
    _, _, index = job_id.rpartition(".")
    return int(index) if index.isdigit() else None


def step_job(workflow: str, step: StepToSend) -> tuple[str, NewJob]:
    """The job of a step whose turn came: its queue, and the job with its inputs before its own args."""
    spec: dict[str, Any] = loads(step.spec)  # type: ignore[assignment]
    payload: bytes = spec["call"]
    if spec["input"] is not None:
        args, kwargs = loads_call(payload)
        given = fill(spec["input"], iter(loads(value) for value in step.inputs))
        payload = dumps_call((given, *args), kwargs)
    job = NewJob(
        id=step_id(workflow, step.step),
        task=spec["task"],
        payload=payload,
        priority=spec["priority"],
        max_attempts=spec["max_attempts"],
        timeout_ms=spec["timeout_ms"],
        inherit=spec["inherit"],
        limits=spec["limits"],
        workflow=workflow,
    )
    return spec["queue"], job


def send(broker: Broker, workflow: str, steps: Sequence[StepToSend]) -> None:
    """Store these steps, each once whoever sends it (their ids are fixed)."""
    by_queue: dict[str, list[NewJob]] = {}
    for step in steps:
        queue, job = step_job(workflow, step)
        by_queue.setdefault(queue, []).append(job)
    for queue, jobs in by_queue.items():
        broker.enqueue(queue, jobs, resend=True)


def stop(broker: Broker, workflow: str, steps: Iterable[tuple[int, str]]) -> None:
    """Cancel the steps of an ended workflow that have not started; running ones finish."""
    by_queue: dict[str, list[str]] = {}
    for index, queue in steps:
        if queue:
            by_queue.setdefault(queue, []).append(step_id(workflow, index))
    for queue, ids in by_queue.items():
        broker.cancel_steps(queue, workflow, ids)


def act(broker: Broker, workflow: str, reply: WorkflowReply) -> None:
    """Do what a workflow script answered: send, stop, then settle an ended workflow."""
    if reply.ready:
        send(broker, workflow, reply.ready)
    if reply.cancel:
        stop(broker, workflow, reply.cancel)
    if reply.settle:
        broker.settle_workflow(workflow, reply.state)


def deliver(broker: Broker, queue: str, job_id: str, workflow: str, state: str, result: bytes, error: str) -> None:
    """Carry one step's report to its workflow, act on the answer, then drop the report."""
    index = step_index(job_id)
    if index is not None:
        reply = broker.report_step(workflow, index, state, result, error)
        act(broker, workflow, reply)
    broker.delivered(queue, [job_id])


def deliver_from_record(broker: Broker, queue: str, job_id: str, workflow: str) -> None:
    """Deliver a report left in the outbox, reading the outcome from the step's record."""
    fields = broker.read(queue, job_id) or {}
    state = (fields.get(b"state") or b"").decode(errors="replace")
    result = fields.get(b"result") or b""
    error = (fields.get(b"error") or b"").decode(errors="replace")
    if state not in ENDED:
        if fields:  # retried by `taskforge dead retry`: it will report again when it ends
            broker.delivered(queue, [job_id])
            return
        state, error = "dead", "WorkflowStepLost: the step's record expired before its outcome was delivered"
    deliver(broker, queue, job_id, workflow, state, result, error)


def deliver_quietly(
    broker: Broker, queue: str, job_id: str, workflow: str, state: str, result: bytes, error: str
) -> None:
    """What a worker does after a step's final transition: deliver now, or leave it to the reconciler."""
    try:
        deliver(broker, queue, job_id, workflow, state, result, error)
    except Exception as exc:  # never let bookkeeping fail the job it follows
        log.warning("workflow %s: the report of step %s waits for the reconciler (%s)", workflow, job_id, exc)
