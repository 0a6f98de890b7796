"""The broker: taskforge's only speaker to Redis, as a few roles over one link.

``Broker`` (one per app, ``app.broker``, built in ``compose.py``) holds
eight roles, each typed by a protocol of ``roles.py``: ``jobs``
(producing), ``claims`` (a worker's claims and outcomes), ``ledger``
(workflows), ``inspection`` (counts and listings), ``cleanup`` (purges,
dead-letter retries), ``flow`` (pausing queues, jobs held back by limits),
``steps`` (a running job's durable steps) and ``index`` (the search
indexes). ``AsyncBroker`` (one per app and event loop,
``app.async_broker()``) holds the async twins of ``jobs``, ``ledger`` and
``flow`` (``aio_roles.py``). Callers are typed against the
narrowest role they use; see docs/architecture.md.

``AsyncBroker`` is loaded on first use: importing the package loads no
``redis.asyncio``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .aio_roles import AsyncBrokerRoles, AsyncJobsRole, AsyncLedgerRole, AsyncWorkflowRole
from .cleanup import Cleanup
from .compose import Broker
from .inspection import Inspection
from .jobs import Jobs
from .link import Link
from .queue import Claims
from .roles import (
    BrokerRoles,
    ClaimsRole,
    CleanupRole,
    InspectionRole,
    JobsRole,
    LedgerRole,
    WorkflowRole,
)
from .workflows import WorkflowStore

if TYPE_CHECKING:
    from .aio import AsyncBroker

__all__ = [
    "AsyncBroker",
    "AsyncBrokerRoles",
    "AsyncJobsRole",
    "AsyncLedgerRole",
    "AsyncWorkflowRole",
    "Broker",
    "BrokerRoles",
    "Claims",
    "ClaimsRole",
    "Cleanup",
    "CleanupRole",
    "Inspection",
    "InspectionRole",
    "Jobs",
    "JobsRole",
    "LedgerRole",
    "Link",
    "WorkflowRole",
    "WorkflowStore",
]


def __getattr__(name: str) -> Any:
    if name == "AsyncBroker":
        from .aio import AsyncBroker

        return AsyncBroker
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
