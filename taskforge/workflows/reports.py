"""Workflows on the app's seams: a step that ended tells its workflow now; a worker repairs what was left.

Every app registers a ``StepReports`` on its final-transition seam
(``finals.py``, ``install``), told of the final transitions of workflow
steps only. Its report was left in the step's queue's outbox by the very
script that made the transition; this carries it to the workflow and sends
what may go next (``delivery.py``), or, when that fails, leaves it there for
the reconciler.

A worker never names this code: it calls the ``WorkflowSeam`` this module
installs when it is imported (``taskforge/workflow_seam.py``; ``taskforge.app``
imports this module, so every process with an app has it). A worker child
asks it for a ``StepReports`` carried by its courier (``worker/courier.py``),
which batches the reports of a busy child; the reconciler
(``worker/reconcile.py``) asks it to deliver, send, resume and audit.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from .. import workflow_seam
from ..workflow_seam import NAME, Carrier
from .aio_delivery import adeliver_if_step
from .delivery import audit, deliver, deliver_from_record, deliver_if_step, report_of, send
from .resume import resume

if TYPE_CHECKING:
    from ..broker.aio_roles import AsyncBrokerRoles
    from ..broker.replies import StepToSend
    from ..broker.roles import BrokerRoles
    from ..broker.workflows import StepReport
    from ..finals import Finals, FinalTransition

log = logging.getLogger("taskforge.workflows")

__all__ = ["NAME", "StepReports", "WorkerSide", "install"]


class StepReports:
    """Carry a step's report to its workflow after its final transition: at once, or by ``carrier``."""

    def __init__(self, carrier: Carrier | None = None) -> None:
        self.carrier = carrier

    def ended(self, broker: BrokerRoles, transition: FinalTransition) -> None:
        t, workflow = transition, transition.workflow
        if workflow is None:  # only the id is known: the record says the rest
            deliver_if_step(broker, t.queue, t.job_id)
            return
        report = report_of(t.queue, t.job_id, workflow, t.state, t.result, t.error)
        try:
            if self.carrier is None:
                deliver(broker, [report])  # here and now, the outbox drop included
            else:
                self.carrier.carry(broker, report, t.busy)
        except Exception as exc:
            log.warning("workflow %s: the report of step %s waits for the reconciler (%s)", workflow, t.job_id, exc)

    async def aended(self, broker: AsyncBrokerRoles, transition: FinalTransition) -> None:
        """A step cancelled or aborted from async code: its record says the rest."""
        await adeliver_if_step(broker, transition.queue, transition.job_id)


class WorkerSide:
    """The ``WorkflowSeam`` a worker calls: its courier's listener and deliveries, its reconciler's repairs."""

    def listener(self, carrier: Carrier | None = None) -> StepReports:
        return StepReports(carrier)

    def deliver(
        self,
        broker: BrokerRoles,
        reports: Sequence[StepReport],
        drop: bool = True,
        dropped: Sequence[StepReport] = (),
        listed: Sequence[str] = (),
    ) -> list[str]:
        return deliver(broker, reports, drop, dropped, listed)

    def deliver_from_record(self, broker: BrokerRoles, queue: str, job_id: str, workflow: str) -> None:
        deliver_from_record(broker, queue, job_id, workflow)

    def send(self, broker: BrokerRoles, workflow: str, steps: Sequence[StepToSend]) -> None:
        send(broker, workflow, steps)

    def finish_resume(self, broker: BrokerRoles, workflow: str) -> None:
        resume(broker, workflow, finish=True)

    def audit(self, broker: BrokerRoles, workflow: str) -> int:
        return audit(broker, workflow)


def install(finals: Finals) -> None:
    """Register workflows on ``finals``: every ``TaskForge`` does, when it is made."""
    finals.listen(NAME, StepReports(), steps_only=True)


workflow_seam.install(WorkerSide())  # at import: whatever process has an app, its worker finds workflows
