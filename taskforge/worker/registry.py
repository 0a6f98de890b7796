"""Live workers announce themselves in Redis, for ``taskforge status``.

Each worker keeps a hash that expires unless renewed, so a worker that was
SIGKILLed disappears from the listing by itself.
"""

from __future__ import annotations

import json
import os
import socket
import time
from typing import Any

import redis

from ..broker import keys

STALE_AFTER_MS = 60_000


class WorkerRegistry:
    def __init__(self, client: redis.Redis, queues: list[str], concurrency: int, ttl: float) -> None:
        self.client = client
        self.id = f"{socket.gethostname()}:{os.getpid()}:{os.urandom(2).hex()}"
        self.ttl_ms = int(ttl * 1000)
        self.static = {
            "id": self.id,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "queues": json.dumps(queues),
            "concurrency": concurrency,
            "started_at": int(time.time() * 1000),
        }

    def beat(self, current: list[dict[str, Any]], jobs_done: int) -> None:
        now = int(time.time() * 1000)
        key = keys.worker_key(self.id)
        pipe = self.client.pipeline(transaction=False)
        pipe.hset(
            key, mapping={**self.static, "jobs_done": jobs_done, "current": json.dumps(current), "heartbeat": now}
        )
        pipe.pexpire(key, self.ttl_ms)
        pipe.zadd(keys.WORKERS, {self.id: now})
        pipe.zremrangebyscore(keys.WORKERS, "-inf", now - STALE_AFTER_MS)
        pipe.execute()

    def remove(self) -> None:
        pipe = self.client.pipeline(transaction=False)
        pipe.delete(keys.worker_key(self.id))
        pipe.zrem(keys.WORKERS, self.id)
        pipe.execute()


def live_workers(client: redis.Redis) -> list[dict[str, Any]]:
    """Every worker whose heartbeat has not expired, oldest first."""
    ids = client.zrange(keys.WORKERS, 0, -1)
    if not ids:
        return []
    pipe = client.pipeline(transaction=False)
    for worker_id in ids:
        pipe.hgetall(keys.worker_key(worker_id.decode()))
    workers = []
    for fields in pipe.execute():
        if not fields:
            continue
        data = {k.decode(): v.decode() for k, v in fields.items()}
        workers.append(
            {
                "id": data["id"],
                "host": data.get("host", ""),
                "pid": int(data.get("pid", 0)),
                "queues": json.loads(data.get("queues", "[]")),
                "concurrency": int(data.get("concurrency", 0)),
                "started_at": int(data.get("started_at", 0)),
                "jobs_done": int(data.get("jobs_done", 0)),
                "current": json.loads(data.get("current", "[]")),
                "heartbeat": int(data.get("heartbeat", 0)),
            }
        )
    return workers
