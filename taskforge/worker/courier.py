"""A worker child's courier: the reports of its workflow steps, delivered by a thread of their own, in batches.

Worker machinery on the final-transition seam (``finals.py``): a child puts
the workflows' listener carried by a ``CourierCarrier`` in the place of the
app's own, and delivers through the ``WorkflowSeam`` workflows installed
(``workflow_seam.py``), never naming workflow code. A lane whose step ended
delivers the report itself when it is free (the next step starts sooner:
no thread to wake, and this lane may well claim it), and hands it to the
courier when it already holds its next job; either way the outbox drop
waits for the courier's next batch. What the courier has not delivered when the process dies is still in
the outbox: the reconciler (``reconcile.py``) delivers it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..workflow_seam import WorkflowSeam, installed

if TYPE_CHECKING:
    from ..broker.roles import BrokerRoles
    from ..broker.workflows import StepReport

log = logging.getLogger("taskforge.workflows")

# A busy child's courier waits this long, or for this many reports, before it
# sends a batch: a few round trips then carry dozens of reports, and the next
# steps of a busy worker start up to 20 ms later than they could (an idle
# child's reports go at once). 5 ms made chains drain about 10% slower.
LINGER_S = 0.02
BATCH = 64


class CourierCarrier:
    """How the workflows' listener carries a child's reports: batched when the lane is busy, the drop always."""

    def __init__(self, courier: Courier) -> None:
        self.courier = courier

    def carry(self, broker: BrokerRoles, report: StepReport, busy: bool) -> None:
        if busy:
            self.courier.post(report, busy)
            return
        # The next step is stored before anything else; dropping the report can wait.
        self.courier.drop(report, self.courier.workflows.deliver(broker, [report], drop=False))


class Courier:
    """A worker child's reports, delivered by a thread of their own, in batches.

    The lane that ran a step hands its report over and goes on to its next
    job; while a batch is on its way, the next reports gather, so a busy
    child pays a few round trips per batch rather than per step, and an idle
    one delivers at once. A report lost with the process is still in the
    outbox: the reconciler delivers it.
    """

    def __init__(self, broker: BrokerRoles, workflows: WorkflowSeam | None = None) -> None:
        self.broker = broker
        self.workflows = workflows or installed()  # asked at start: a missing seam fails here, not mid-job
        self.waiting: deque[StepReport] = deque()
        self.busy = 0  # reports taken from ``waiting`` and not yet delivered
        self.linger = False  # the latest report's lane went straight on to another job
        self.dropping: list[StepReport] = []  # delivered by their lane: only their drop is left
        self.listing: list[str] = []  # workflows those reports made succeed: only their listing is left
        self.cond = threading.Condition()
        self.thread = threading.Thread(target=self.run, name="taskforge-courier", daemon=True)
        self.thread.start()

    def post(self, report: StepReport, busy: bool = False) -> None:
        """Hand a report over; ``busy``: its lane already holds its next job, so a batch may
        wait a moment for more (a lane going idle, or a failure, is delivered at once)."""
        with self.cond:
            self.waiting.append(report)
            self.linger = busy
            # A lingering courier wakes by itself when its moment is up: waking it for
            # every report of a busy child would only trade the GIL back and forth.
            if not busy or len(self.waiting) == 1 or len(self.waiting) >= BATCH:
                self.cond.notify_all()

    def drop(self, report: StepReport, succeeded: Sequence[str] = ()) -> None:
        """A report its lane delivered itself: drop it from the outbox (and list the workflows it
        made succeed) with the next batch."""
        with self.cond:
            self.dropping.append(report)
            self.listing.extend(succeeded)
            self.cond.notify_all()

    def idle(self) -> bool:
        with self.cond:
            return not self.waiting and not self.busy and not self.dropping

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until every report posted so far was delivered (or tried); True if it was."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while self.waiting or self.busy or self.dropping:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.cond.wait(left)
        return True

    def run(self) -> None:
        carried: list[StepReport] = []  # delivered, to drop with the next batch (same round trip)
        listed: list[str] = []  # succeeded, to list with the next batch
        while True:
            with self.cond:
                while not self.waiting and not self.dropping:
                    self.cond.wait()
                deadline = time.monotonic() + LINGER_S
                while self.linger and len(self.waiting) < BATCH and (left := deadline - time.monotonic()) > 0:
                    self.cond.wait(left)
                batch = list(self.waiting)
                self.waiting.clear()
                drops, self.dropping = [*carried, *self.dropping], []
                listed, self.listing = [*listed, *self.listing], []
                self.busy = len(batch) + len(drops)
            carried, listing, listed = [], listed, []
            try:
                succeeded = self.workflows.deliver(self.broker, batch, drop=False, dropped=drops, listed=listing)
                with self.cond:
                    more = bool(self.waiting)
                if more:  # the next batch is already here: its first round trip does these
                    carried, listed = batch, succeeded
                else:
                    self.broker.ledger.delivered(batch)
                    self.broker.ledger.settle_workflows([(workflow, "succeeded") for workflow in succeeded])
            except Exception as exc:  # the reconciler delivers what this could not
                log.warning("%d workflow reports wait for the reconciler (%s)", len(batch), exc)
            finally:
                with self.cond:
                    self.busy = len(carried)
                    self.cond.notify_all()
