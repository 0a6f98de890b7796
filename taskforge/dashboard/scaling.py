"""The queue depth an autoscaler reads: ``GET /api/queues/{queue}/depth`` (KEDA's metrics-api scaler).

Served by the dashboard, which runs whether or not any worker does: the
workers' own Prometheus metrics go away with the last worker when an
autoscaler scales them to zero, and nothing but a worker promotes a
scheduled job that has come due, so the depth counts those jobs too, or a
queue scaled to zero would never wake for them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..broker.keys import validate_queue_name

if TYPE_CHECKING:
    from ..app import TaskForge


@dataclass(frozen=True)
class Depth:
    """One queue's work, as an autoscaler counts it."""

    queue: str
    pending: int  # ready to start (keyed and limited jobs included)
    due: int  # scheduled or retrying, already due: the next worker promotes and runs them
    running: int
    scheduled: int  # scheduled or retrying, due or not
    paused: bool

    @property
    def depth(self) -> int:
        """Jobs a worker could start now (none while the queue is paused), plus those running."""
        return self.running + (0 if self.paused else self.pending + self.due)

    def to_dict(self) -> dict[str, Any]:
        return {
            "queue": self.queue,
            "depth": self.depth,
            "pending": self.pending,
            "due": self.due,
            "running": self.running,
            "scheduled": self.scheduled,
            "paused": self.paused,
        }


def depth(app: TaskForge, queue: str) -> Depth:
    """The depth of ``queue`` now: a few reads, none of them over the jobs themselves."""
    queue = validate_queue_name(queue)
    broker = app.broker
    counts = broker.inspection.counts(queue)
    return Depth(
        queue=queue,
        pending=counts["pending"],
        due=broker.inspection.due_count(queue),
        running=counts["running"],
        scheduled=counts["scheduled"],
        paused=queue in broker.flow.paused([queue]),
    )
