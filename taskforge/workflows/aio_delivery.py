"""``delivery.py``'s producer-side moves, awaited: send steps, stop them, and report a step ended by hand.

Each move is one of ``delivery.py``'s plans (``sending``, ``stopping``,
``acting``), driven on this loop, so a step sent from async code is the job
a worker's courier would have sent, under the same fixed id, stored once
whoever sends it. What a crash leaves half done here is in the outbox or marked
launching, exactly as on the sync side: the reconciler finishes it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from .delivery import ENDED, acting, reading_inputs, report_of, sending, step_index, stopping

if TYPE_CHECKING:
    from ..broker.aio_roles import AsyncBrokerRoles
    from ..broker.replies import StepToSend, WorkflowReply

log = logging.getLogger("taskforge.workflows")


async def awith_inputs(broker: AsyncBrokerRoles, workflow: str, step: StepToSend) -> StepToSend:
    """``delivery.with_inputs``: the results the script left in the record, read a slice per call."""
    return await broker.drive(reading_inputs(workflow, step))


async def asend(
    broker: AsyncBrokerRoles, workflow: str, steps: Sequence[StepToSend], failed: dict[bytes, bytes] | None = None
) -> None:
    """``delivery.send``: store these steps, each once whoever sends it (their ids are fixed)."""
    await broker.drive(sending(broker.settings, workflow, steps, failed))


async def astop(broker: AsyncBrokerRoles, workflow: str, steps: Iterable[tuple[int, str]]) -> None:
    """``delivery.stop``: cancel the steps of an ended workflow that have not started."""
    await broker.drive(stopping(broker.settings, workflow, steps))


async def aact(broker: AsyncBrokerRoles, workflow: str, reply: WorkflowReply, state: str | None = None) -> None:
    """``delivery.act``: send what may go next, stop the rest of an ended workflow, settle it."""
    await broker.drive(acting(broker.settings, workflow, reply, state))


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
