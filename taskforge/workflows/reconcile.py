"""The reconciler: any worker, with its other housekeeping, finishes what a crash left half done.

Two things can be left: a report in a queue's outbox (its worker died
between the step's final transition and the delivery, or Redis went away),
and a workflow marked launching (its producer died before its first steps
were sent). Both are repaired by doing the same idempotent work again.
A report is delivered only once it has been seen on two passes in a row, so
the reconciler does not race the worker that is delivering it right now.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from .delivery import deliver_from_record, send

if TYPE_CHECKING:
    from ..broker.queue import Broker

log = logging.getLogger("taskforge.workflows")

LAUNCH_GRACE_MS = 30_000  # a producer takes well under this between storing a workflow and sending its steps


class Reconciler:
    def __init__(self, broker: Broker, queues: Sequence[str]) -> None:
        self.broker = broker
        self.queues = list(queues)
        self.seen: dict[str, set[str]] = {}

    def run(self) -> int:
        """One pass; returns how many reports and launches it repaired."""
        repaired = 0
        for queue in self.queues:
            box = self.broker.outbox(queue)
            before = self.seen.get(queue, set())
            self.seen[queue] = set(box)
            for job_id, workflow in box.items():
                if job_id in before:
                    log.info("workflow %s: delivering the report of step %s left behind", workflow, job_id)
                    deliver_from_record(self.broker, queue, job_id, workflow)
                    repaired += 1
        cutoff = int(time.time() * 1000) - LAUNCH_GRACE_MS
        for workflow in self.broker.launching_since(cutoff):
            reply = self.broker.workflow_flight(workflow)
            if reply.ready:
                log.info("workflow %s: sending first steps its producer did not confirm", workflow)
                send(self.broker, workflow, reply.ready)
                repaired += 1
            self.broker.workflow_launched(workflow)
        return repaired
