"""Put jobs into each state through the broker's own operations, without a worker."""

from __future__ import annotations

from typing import Any

from taskforge import TaskForge
from taskforge.broker.queue import Claim
from taskforge.serialization import dumps_result

LEASE_MS = 60_000


def claim_one(app: TaskForge, queue: str) -> Claim:
    """Claim the next ready job of ``queue`` (the caller knows which one that is)."""
    claims, _ = app.broker.claims.dequeue(queue, LEASE_MS)
    assert len(claims) == 1, f"nothing ready in {queue}"
    return claims[0]


def running(app: TaskForge, task: str, *args: Any, queue: str = "default") -> str:
    app.send(task, *args)
    return claim_one(app, queue).id


def retrying(app: TaskForge, task: str, *args: Any, queue: str = "default") -> str:
    app.send(task, *args)
    job = claim_one(app, queue)
    assert app.broker.claims.fail(queue, job.id, job.token, "ValueError: try later", "", 600) == "retrying"
    return job.id


def dead(app: TaskForge, task: str, *args: Any, queue: str = "default", error: str = "RuntimeError: boom") -> str:
    app.send(task, *args)
    job = claim_one(app, queue)
    traceback = f"Traceback (most recent call last):\n  ...\n{error}\n"
    assert app.broker.claims.fail(queue, job.id, job.token, error, traceback, None) == "dead"
    return job.id


def succeeded(app: TaskForge, task: str, result: Any, *args: Any, queue: str = "default") -> str:
    app.send(task, *args)
    job = claim_one(app, queue)
    assert app.broker.claims.succeed(queue, job.id, job.token, dumps_result(result))
    return job.id
