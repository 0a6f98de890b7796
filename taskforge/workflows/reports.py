"""Workflows on the final-transition seam (``finals.py``): a step that ended tells its workflow now.

Every app registers a ``StepReports`` (``install``), told of the final
transitions of workflow steps only. Its report was left in the step's
queue's outbox by the very script that made the transition; this carries
it to the workflow and sends what may go next (``delivery.py``), or, when
that fails, leaves it there for the reconciler. A worker child puts its
courier in this listener's place (``worker/courier.py``), which batches the
reports of a busy child.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from .aio_delivery import adeliver_if_step
from .delivery import deliver, deliver_if_step, report_of

if TYPE_CHECKING:
    from ..broker.aio_roles import AsyncBrokerRoles
    from ..broker.roles import BrokerRoles
    from ..broker.workflows import StepReport
    from ..finals import Finals, FinalTransition

log = logging.getLogger("taskforge.workflows")

NAME = "workflows"  # the listener's name on ``app.finals``


class StepReports:
    """Carry a step's report to its workflow at once, after its final transition."""

    def ended(self, broker: BrokerRoles, transition: FinalTransition) -> None:
        t, workflow = transition, transition.workflow
        if workflow is None:  # only the id is known: the record says the rest
            deliver_if_step(broker, t.queue, t.job_id)
            return
        report = report_of(t.queue, t.job_id, workflow, t.state, t.result, t.error)
        try:
            self.carry(broker, report, t.busy)
        except Exception as exc:
            log.warning("workflow %s: the report of step %s waits for the reconciler (%s)", workflow, t.job_id, exc)

    def carry(self, broker: BrokerRoles, report: StepReport, busy: bool) -> None:
        """Deliver ``report`` and drop it from the outbox, here and now."""
        deliver(broker, [report])

    async def aended(self, broker: AsyncBrokerRoles, transition: FinalTransition) -> None:
        """A step cancelled or aborted from async code: its record says the rest."""
        await adeliver_if_step(broker, transition.queue, transition.job_id)


def install(finals: Finals) -> None:
    """Register workflows on ``finals``: every ``TaskForge`` does, when it is made."""
    finals.listen(NAME, StepReports(), steps_only=True)
