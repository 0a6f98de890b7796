"""The live-worker listing: what a worker writes about itself is what ``live_workers`` reads back."""

from __future__ import annotations

import os
import time

from taskforge import TaskForge
from taskforge.broker import keys, workers
from taskforge.worker.messages import JobStarted
from taskforge.worker.pool import Running
from taskforge.worker.registry import WorkerRegistry
from tests.conftest import inspector


def test_a_heartbeat_lists_the_worker_and_its_jobs_until_it_leaves(app: TaskForge) -> None:
    client = app.broker.client
    registry = WorkerRegistry(client, ["default", "mail"], concurrency=4, ttl=20)
    job = Running(JobStarted(0, "job-1", "token", "mail", "app.send", 1, None), started=time.monotonic() - 2)
    before = int(time.time() * 1000)
    registry.beat([job], jobs_done=7)
    [listed] = workers.live_workers(client)
    assert listed["id"] == registry.id and listed["pid"] == os.getpid()
    assert listed["queues"] == ["default", "mail"] and listed["concurrency"] == 4 and listed["jobs_done"] == 7
    [current] = listed["current"]
    assert {k: current[k] for k in ("id", "task", "queue")} == {"id": "job-1", "task": "app.send", "queue": "mail"}
    assert before - 2500 <= current["started_at"] <= before - 1500
    assert listed["heartbeat"] >= before
    assert 0 < inspector(app).pttl(keys.worker_key(registry.id)) <= 20_000
    registry.remove()
    assert workers.live_workers(client) == []
    assert client.zcard(keys.WORKERS) == 0


def test_an_expired_worker_hash_is_not_listed(app: TaskForge) -> None:
    client = app.broker.client
    gone = WorkerRegistry(client, ["default"], concurrency=1, ttl=20)
    alive = WorkerRegistry(client, ["default"], concurrency=1, ttl=20)
    gone.beat([], 0)
    alive.beat([], 0)
    client.delete(keys.worker_key(gone.id))  # as its TTL would, after a SIGKILL
    assert [w["id"] for w in workers.live_workers(client)] == [alive.id]
