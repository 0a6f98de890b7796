"""The worker's one door to workflows: what its courier and its reconciler call, installed by workflows.

A worker runs a workflow's steps as plain jobs. What only workflows know
(carry a step's report to its workflow and send the steps it frees; repair
what a crash or a failover left half done) it reaches through the
``WorkflowSeam`` installed here, so no module of ``taskforge/worker/`` names
workflow code (``tests/test_layers.py`` forbids it), just as the
final-transition seam (``finals.py``) is the one way a job's end reaches its
workflow. ``workflows/reports.py`` installs it when it is imported, and
``taskforge.app`` imports that module, so every process that has an app (a
worker's supervisor and each child load one before anything else) has it,
whether or not the user's code ever imported ``taskforge.workflows``.

What is installed is code, not state: every app of a process shares it, and
it takes the broker to act on at each call.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from .broker.replies import StepToSend
    from .broker.roles import BrokerRoles
    from .broker.workflows import StepReport
    from .finals import FinalListener

NAME = "workflows"  # the name of the workflows' listener on ``app.finals``: a worker child puts its own in its place


class Carrier(Protocol):
    """How the workflows' listener carries a step's report, once it made it (a worker child: by its courier)."""

    def carry(self, broker: BrokerRoles, report: StepReport, busy: bool) -> None: ...


class WorkflowSeam(Protocol):
    """What a worker asks of workflows; each call is idempotent, so a repair may run twice."""

    def listener(self, carrier: Carrier | None = None) -> FinalListener:
        """The listener to register as ``NAME`` on ``app.finals``; ``carrier``: None delivers at once."""
        ...

    def deliver(
        self,
        broker: BrokerRoles,
        reports: Sequence[StepReport],
        drop: bool = True,
        dropped: Sequence[StepReport] = (),
        listed: Sequence[str] = (),
    ) -> list[str]:
        """Carry reports to their workflows and send what they free (``drop`` False: a courier's batch,
        which returns the workflows left to list and drops ``dropped``, lists ``listed`` on the way)."""
        ...

    def deliver_from_record(self, broker: BrokerRoles, queue: str, job_id: str, workflow: str) -> None:
        """Deliver a report left in ``queue``'s outbox, its outcome read from the step's record."""
        ...

    def send(self, broker: BrokerRoles, workflow: str, steps: Sequence[StepToSend]) -> None:
        """Store these steps of ``workflow`` (each once, whoever sends it): a launch its producer left."""
        ...

    def finish_resume(self, broker: BrokerRoles, workflow: str) -> None:
        """Finish a resume whose process died before making the workflow's steps ready and sending them."""
        ...

    def audit(self, broker: BrokerRoles, workflow: str) -> int:
        """Take up what nobody will of a running workflow (a write Redis lost); how many steps it took up."""
        ...


_installed: WorkflowSeam | None = None


def install(seam: WorkflowSeam) -> None:
    """Make ``seam`` what every worker of this process calls (workflows do, at import)."""
    global _installed
    _installed = seam


def installed() -> WorkflowSeam:
    """The installed seam; a worker asks for it when it starts, so a missing one fails there, not mid-job."""
    if _installed is None:
        raise RuntimeError(
            "no workflows on the worker's seam: import taskforge.workflows.reports (taskforge.app does) "
            "before starting a worker"
        )
    return _installed
