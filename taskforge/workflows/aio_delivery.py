"""``delivery.py``'s producer-side moves, awaited: send steps, stop them, and report a step ended by hand.

Built from ``delivery.py``'s pure parts (``step_job``, ``report_of``, the
``ENDED`` states), so a step sent from async code is the job a worker's
courier would have sent, under the same fixed id, stored once whoever sends
it. What a crash leaves half done here is in the outbox or marked
launching, exactly as on the sync side: the reconciler finishes it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from ..broker.record import NewJob
from .delivery import ENDED, failed_at, input_slices, report_of, step_id, step_index, step_job
from .record import StepField

if TYPE_CHECKING:
    from ..broker.aio_roles import AsyncBrokerRoles
    from ..broker.replies import StepToSend, WorkflowReply

log = logging.getLogger("taskforge.workflows")


async def awith_inputs(broker: AsyncBrokerRoles, workflow: str, step: StepToSend) -> StepToSend:
    """``delivery.with_inputs``: the results the script left in the record, read a slice per call."""
    if not step.held:
        return step
    (listed,) = await broker.ledger.workflow_fields(workflow, [StepField.INPUT.at(step.step)])
    values = [v for names in input_slices(listed) for v in await broker.ledger.workflow_fields(workflow, names)]
    return step._replace(inputs=[v or b"" for v in values], held=0)


async def asend(
    broker: AsyncBrokerRoles, workflow: str, steps: Sequence[StepToSend], failed: dict[bytes, bytes] | None = None
) -> None:
    """``delivery.send``: store these steps, each once whoever sends it (their ids are fixed)."""
    by_queue: dict[str, list[NewJob]] = {}
    for step in steps:
        queue, job = step_job(workflow, await awith_inputs(broker, workflow, step), failed)
        by_queue.setdefault(queue, []).append(job)
    for queue, jobs in by_queue.items():
        await broker.jobs.enqueue(queue, jobs, resend=True)


async def astop(broker: AsyncBrokerRoles, workflow: str, steps: Iterable[tuple[int, str]]) -> None:
    """``delivery.stop``: cancel the steps of an ended workflow that have not started."""
    by_queue: dict[str, list[str]] = {}
    for index, queue in steps:
        if queue:
            by_queue.setdefault(queue, []).append(step_id(workflow, index))
    for queue, ids in by_queue.items():
        await broker.ledger.cancel_steps(queue, workflow, ids)


async def aact(broker: AsyncBrokerRoles, workflow: str, reply: WorkflowReply, state: str | None = None) -> None:
    """``delivery.act``: send what may go next, stop the rest of an ended workflow, settle it."""
    if reply.ready:
        where = failed_at(workflow, reply)
        failed = None if where is None else await broker.jobs.read(*where) or {}
        await asend(broker, workflow, reply.ready, failed)
    if reply.cancel:
        await astop(broker, workflow, reply.cancel)
    if reply.settle:
        await broker.ledger.settle_workflow(workflow, state or reply.state)


async def adeliver_if_step(broker: AsyncBrokerRoles, queue: str, job_id: str) -> None:
    """``delivery.deliver_if_step``: a step cancelled or aborted by hand tells its workflow now.

    Best effort, as on the sync side: what fails here stays in the outbox
    for the reconciler.
    """
    if step_index(job_id) is None:
        return
    try:
        fields = await broker.jobs.read(queue, job_id) or {}
        workflow = (fields.get(b"workflow") or b"").decode()
        state = (fields.get(b"state") or b"").decode(errors="replace")
        if not workflow or state not in ENDED:
            return
        error = (fields.get(b"error") or b"").decode(errors="replace")
        report = report_of(queue, job_id, workflow, state, fields.get(b"result") or b"", error)
        reply = await broker.ledger.report_step(workflow, report.step, report.state, report.result, report.error)
        await aact(broker, workflow, reply)
        await broker.ledger.delivered(queue, [job_id])
    except Exception as exc:  # the reconciler delivers it
        log.warning("the report of step %s waits for the reconciler (%s)", job_id, exc)
