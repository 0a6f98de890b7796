"""The reconciler: any worker, with its other housekeeping, finishes the workflow work a crash left half done.

Three things can be left: a report in a queue's outbox (its worker died
between the step's final transition and the delivery, or Redis went away),
a workflow marked launching (its producer died before its first steps
were sent), and one marked resuming (``resume.py``: its process died before
the steps of a resumed workflow were made ready and sent). All are
repaired by doing the same idempotent work again.
A report is delivered only once it has been seen on two passes in a row, so
the reconciler does not race the worker that is delivering it right now.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..workflows.delivery import ENDED, deliver_from_record, send, step_id
from ..workflows.record import StepField, WorkflowField
from ..workflows.resume import resume
from ..workflows.spec import StepSpec

if TYPE_CHECKING:
    from ..broker.roles import BrokerRoles

log = logging.getLogger("taskforge.workflows")

LAUNCH_GRACE_MS = 30_000  # a producer takes well under this between storing a workflow and sending its steps


AUDIT_EVERY_S = 60.0  # how often a worker looks over running workflows, a slice at a time
AUDIT_SLICE = 20
AUDIT_AGE_MS = 60_000  # a workflow younger than this is left to its own deliveries


class Reconciler:
    def __init__(self, broker: BrokerRoles, queues: Sequence[str]) -> None:
        self.broker = broker
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
                    deliver_from_record(self.broker, queue, job_id, workflow)
                    repaired += 1
        cutoff = int(time.time() * 1000) - LAUNCH_GRACE_MS
        for workflow in self.broker.ledger.launching_since(cutoff):
            reply = self.broker.ledger.workflow_flight(workflow)
            if reply.state == "gone":  # its delay() failed before the record was stored: unlist it
                self.broker.ledger.settle_workflow(workflow, "gone")
                continue
            if reply.ready:
                log.info("workflow %s: sending first steps its producer did not confirm", workflow)
                send(self.broker, workflow, reply.ready)
                repaired += 1
            self.broker.ledger.workflow_launched(workflow)
        for workflow in self.broker.ledger.resuming_since(cutoff):
            log.info("workflow %s: finishing a resume its process did not confirm", workflow)
            resume(self.broker, workflow, finish=True)
            repaired += 1
        if time.monotonic() >= self.next_audit:
            self.next_audit = time.monotonic() + AUDIT_EVERY_S
            repaired += self.audit()
        return repaired

    def audit(self) -> int:
        """Look over a slice of the workflows running for a while, and take up what nobody will.

        The outbox covers a crash; it cannot cover a write Redis itself lost:
        with asynchronous replication a failover may drop a step's report
        after its outbox entry was dropped, or a step stored by the report's
        sender. So, slowly, every running workflow is checked: a step in
        flight whose record says it ended is delivered again, one not stored
        at all is sent again, and a workflow that ended but is still listed
        as running is settled. All of it is the same idempotent work again.
        """
        ids = self.broker.ledger.running_workflows(self.audited, AUDIT_SLICE, before_ms=now_ms() - AUDIT_AGE_MS)
        self.audited = 0 if len(ids) < AUDIT_SLICE else self.audited + len(ids)
        repaired = 0
        for workflow in ids:
            repaired += self.audit_one(workflow)
        return repaired

    def audit_one(self, workflow: str) -> int:
        flight = self.broker.ledger.workflow_flight(workflow)
        if flight.state == "gone":
            self.broker.ledger.settle_workflow(workflow, "gone")  # expired: off the running list
            return 0
        if flight.state != "running":  # ended, its settling lost: any step's report settles it
            [failed] = self.broker.ledger.workflow_fields(workflow, [WorkflowField.FAILED_STEP.value])
            index = int(failed) if failed else 0
            [queue] = self.broker.ledger.workflow_fields(workflow, [StepField.QUEUE.at(index)])
            deliver_from_record(self.broker, queue.decode() if queue else "", step_id(workflow, index), workflow)
            self.broker.ledger.settle_workflow(
                workflow, flight.state
            )  # listed under its final state, whoever settled it
            return 1
        steps = [(StepSpec.decode(entry.spec).queue, step_id(workflow, entry.step)) for entry in flight.ready]
        records = self.broker.ledger.step_records(steps)
        unsent = [entry for entry, record in zip(flight.ready, records, strict=True) if not record]
        if unsent:
            send(self.broker, workflow, unsent)
        ended = [(q, j) for (q, j), record in zip(steps, records, strict=True) if record.get(b"state") in DONE]
        for step_queue, job_id in ended:
            deliver_from_record(self.broker, step_queue, job_id, workflow)
        if unsent or ended:
            log.warning("workflow %s: took up %d steps nobody would have", workflow, len(unsent) + len(ended))
        return len(unsent) + len(ended)


DONE = {state.encode() for state in ENDED}


def now_ms() -> int:
    return int(time.time() * 1000)
