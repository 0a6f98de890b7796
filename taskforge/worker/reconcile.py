"""The reconciler: any worker, with its other housekeeping, finishes the workflow work a crash left half done.

Three things can be left: a report in a queue's outbox (its worker died
between the step's final transition and the delivery, or Redis went away),
a workflow marked launching (its producer died before its first steps
were sent), and one marked resuming (``resume.py``: its process died before
the steps of a resumed workflow were made ready and sent). All are
repaired by doing the same idempotent work again, through the
``WorkflowSeam`` workflows installed (``workflow_seam.py``): this module
decides when, and never names workflow code.
A report is delivered only once it has been seen on two passes in a row, so
the reconciler does not race the worker that is delivering it right now.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..broker import dependencies
from ..workflow_seam import WorkflowSeam, installed

if TYPE_CHECKING:
    from ..broker.roles import BrokerRoles

log = logging.getLogger("taskforge.workflows")

LAUNCH_GRACE_MS = 30_000  # a producer takes well under this between storing a workflow and sending its steps


AUDIT_EVERY_S = 60.0  # how often a worker looks over running workflows, a slice at a time
AUDIT_SLICE = 20
AUDIT_AGE_MS = 60_000  # a workflow younger than this is left to its own deliveries


class Reconciler:
    def __init__(self, broker: BrokerRoles, queues: Sequence[str], workflows: WorkflowSeam | None = None) -> None:
        self.broker = broker
        self.workflows = workflows or installed()  # asked at start: a missing seam fails here, not mid-pass
        self.queues = list(queues)
        self.seen: dict[str, set[str]] = {}
        self.next_audit = time.monotonic() + AUDIT_EVERY_S
        self.audited = 0  # where the next slice of running workflows starts

    def run(self) -> int:
        """One pass; returns how many reports and launches it repaired."""
        repaired = 0
        for queue in self.queues:
            box = self.broker.ledger.outbox(queue)
            before = self.seen.get(queue, set())
            self.seen[queue] = set(box)
            for job_id, workflow in box.items():
                if job_id in before:
                    log.info("workflow %s: delivering the report of step %s left behind", workflow, job_id)
                    self.workflows.deliver_from_record(self.broker, queue, job_id, workflow)
                    repaired += 1
        # Ends of jobs others wait for (depends_on): idempotent reports, so delivered at first sight.
        repaired += self.dependencies()
        cutoff = int(time.time() * 1000) - LAUNCH_GRACE_MS
        for workflow in self.broker.ledger.launching_since(cutoff):
            reply = self.broker.ledger.workflow_flight(workflow)
            if reply.state == "gone":  # its delay() failed before the record was stored: unlist it
                self.broker.ledger.settle_workflow(workflow, "gone")
                continue
            if reply.ready:
                log.info("workflow %s: sending first steps its producer did not confirm", workflow)
                self.workflows.send(self.broker, workflow, reply.ready)
                repaired += 1
            self.broker.ledger.workflow_launched(workflow)
        for workflow in self.broker.ledger.resuming_since(cutoff):
            log.info("workflow %s: finishing a resume its process did not confirm", workflow)
            self.workflows.finish_resume(self.broker, workflow)
            repaired += 1
        if time.monotonic() >= self.next_audit:
            self.next_audit = time.monotonic() + AUDIT_EVERY_S
            repaired += self.audit()
        return repaired

    def dependencies(self) -> int:
        """Ends of jobs others wait for (depends_on) reported, and what a dead producer left held;
        a failure (damage, an outage) is logged and waits for the next pass, never stops the worker."""
        retention_ms, told = self.broker.settings.retention_ms, 0
        for queue in self.queues:  # one queue's damage holds up no other
            try:
                told += self.broker.drive(dependencies.deliver_boxes([queue], retention_ms))
                told += self.broker.drive(dependencies.audit([queue], retention_ms))
            except Exception as exc:
                log.warning("depends_on: the reports of queue %s wait for the next pass (%s)", queue, exc)
        return told

    def audit(self) -> int:
        """Look over a slice of the workflows running for a while, and take up what nobody will.

        The outbox covers a crash; it cannot cover a write Redis itself lost
        (a failover with asynchronous replication). So, slowly, every running
        workflow is checked by the seam's ``audit`` (``workflows/delivery.py``
        says what it repairs), the same idempotent work again.
        """
        ids = self.broker.ledger.running_workflows(self.audited, AUDIT_SLICE, before_ms=now_ms() - AUDIT_AGE_MS)
        self.audited = 0 if len(ids) < AUDIT_SLICE else self.audited + len(ids)
        repaired = 0
        for workflow in ids:
            repaired += self.workflows.audit(self.broker, workflow)
        return repaired


def now_ms() -> int:
    return int(time.time() * 1000)
