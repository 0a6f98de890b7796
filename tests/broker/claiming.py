"""Claims made by hand, as a worker's lane makes them: the broker tests of failures and losses share these."""

from __future__ import annotations

from typing import Any

from taskforge import TaskForge
from taskforge.broker.keys import QueueKeys

Q = QueueKeys("default")
LEASE = 30_000


def claim_one(app: TaskForge) -> Any:
    """The one job a claim of ``default`` takes (it must take exactly one)."""
    claims, _ = app.broker.claims.dequeue("default", LEASE)
    assert len(claims) == 1
    return claims[0]


def expire_leases(app: TaskForge) -> None:
    """As if every worker died: each running job's lease ran out long ago (no sleeping)."""
    client = app.broker.client
    for job_id in client.zrange(Q.running, 0, -1):
        client.zadd(Q.running, {job_id: 0})
