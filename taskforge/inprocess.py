"""Run jobs in the calling process: ``app.drain()``, for tests and eager mode.

The same runner a worker uses (hooks, middleware, retries, dead letters,
results), without processes, leases renewal or timeouts.

This module is the one door from the API to worker code: ``app.drain()`` and
``app.eager = True`` import it when first used, and it loads the worker's
runner only when a drain starts, so a producer that never drains never loads
``taskforge.worker`` (docs/architecture.md).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from .handle import JobHandle

if TYPE_CHECKING:
    from .app import TaskForge
    from .job import JobInfo

DRAIN_LEASE_MS = 3_600_000


def drain(app: TaskForge, *, advance: timedelta | float | None = None, max_jobs: int = 100_000) -> list[JobInfo]:
    from .worker.runner import run_claim  # loaded by the first drain, not by the pytest plugin

    seconds = advance.total_seconds() if isinstance(advance, timedelta) else advance
    broker = app.broker
    ran: list[JobInfo] = []
    while len(ran) < max_jobs:
        # Read again each pass: a workflow's next step may be on a queue not seen before.
        queues = list(dict.fromkeys([*app.queues(), *broker.queues()]))
        claimed = False
        for queue in queues:
            if seconds:
                broker.fast_forward(queue, seconds)
            claims, _ = broker.dequeue(queue, DRAIN_LEASE_MS)
            for claim in claims:
                run_claim(app, claim)
                ran.append(JobHandle(app, claim.id, queue).info())
                claimed = True
        if not claimed:
            return ran
    return ran


def eager_callback(app: TaskForge) -> Callable[[JobHandle[Any]], object]:
    """Eager mode's after-enqueue callback: drain ``app`` right after each job is stored.

    A job that enqueues another drains again from inside its own run, so
    work runs depth-first, in the caller's thread, as the testing kit says.
    """

    def drain_now(handle: JobHandle[Any]) -> object:
        return drain(app)

    return drain_now
