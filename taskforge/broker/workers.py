"""The live-worker listing in Redis: the commands and key names, beside the queue's own.

A worker announces itself for ``taskforge status`` and the dashboard; what
it announces is the worker's business (``worker/registry.py``), how it is
stored is the broker's. Keeping the Redis side here means the tools that
read the listing (``status.py``) never import the worker package, and every
key taskforge writes is built in ``broker/``.

Each worker keeps a hash that expires unless its heartbeat renews it, plus a
score in one zset, so a worker that was SIGKILLed disappears by itself.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, cast

import redis

from . import keys

Client = redis.Redis | redis.RedisCluster  # what broker.connection.connect() returns

Field = str | int  # what a worker's hash holds: text, JSON text and numbers

# A zset entry older than this belongs to a worker long gone: its hash has
# expired, only the index entry is left to trim.
STALE_AFTER_MS = 60_000


def beat(client: Client, worker_id: str, fields: Mapping[str, Field], ttl_ms: int, now_ms: int) -> None:
    """Write one worker's description and keep it alive for ``ttl_ms`` more."""
    key = keys.worker_key(worker_id)
    pipe = client.pipeline(transaction=False)
    pipe.hset(key, mapping=dict(fields))  # type: ignore[arg-type]  # redis-py's Mapping is invariant in its key
    pipe.pexpire(key, ttl_ms)
    pipe.zadd(keys.WORKERS, {worker_id: now_ms})
    pipe.zremrangebyscore(keys.WORKERS, "-inf", now_ms - STALE_AFTER_MS)
    pipe.execute()


def remove(client: Client, worker_id: str) -> None:
    """A worker that stops cleanly leaves the listing at once, not when its hash expires."""
    pipe = client.pipeline(transaction=False)
    pipe.delete(keys.worker_key(worker_id))
    pipe.zrem(keys.WORKERS, worker_id)
    pipe.execute()


def live_workers(client: Client, host: str | None = None) -> list[dict[str, Any]]:
    """Every worker whose heartbeat has not expired, oldest first; with ``host``, only that host's.

    A worker's id starts with its host name, so the others' hashes are not read.
    """
    ids = cast(list[bytes], client.zrange(keys.WORKERS, 0, -1))
    if host is not None:
        ids = [worker_id for worker_id in ids if worker_id.startswith(host.encode() + b":")]
    if not ids:
        return []
    pipe = client.pipeline(transaction=False)
    for worker_id in ids:
        pipe.hgetall(keys.worker_key(worker_id.decode()))
    return [decode(fields) for fields in pipe.execute() if fields]


def decode(fields: Mapping[bytes, bytes]) -> dict[str, Any]:
    """One worker's hash as plain data; fields a worker of an older version did not write get defaults."""
    data = {k.decode(): v.decode() for k, v in fields.items()}
    return {
        "id": data["id"],
        "host": data.get("host", ""),
        "pid": int(data.get("pid", 0)),
        "queues": json.loads(data.get("queues", "[]")),
        "concurrency": int(data.get("concurrency", 0)),
        "started_at": int(data.get("started_at", 0)),
        "jobs_done": int(data.get("jobs_done", 0)),
        "current": json.loads(data.get("current", "[]")),
        "heartbeat": int(data.get("heartbeat", 0)),
        "clock_offset_ms": int(data.get("clock_offset_ms", 0)),  # its wall clock minus Redis's
        # What other workers read: the tasks it serves, its claim tokens' prefix, what proves it gone.
        "tasks": json.loads(data.get("tasks", "null")),  # None: a worker of an older version, tasks unknown
        "owner": data.get("owner", ""),
        "boot": data.get("boot", ""),
        "pidns": data.get("pidns", ""),
        "processes": json.loads(data.get("processes", "[]")),
    }
