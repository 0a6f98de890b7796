"""The live-worker listing in Redis: the commands and key names, beside the queue's own.

A worker announces itself for ``taskforge status`` and the dashboard; what
it announces is the worker's business (``worker/registry.py``), how it is
stored is the broker's. Keeping the Redis side here means the tools that
read the listing (``status.py``) never import the worker package, and every
key taskforge writes is built in ``broker/``.

Each worker keeps a hash that expires unless its heartbeat renews it, plus a
score in one zset, so a worker that was SIGKILLed disappears by itself. It
is listed as alive until ``alive_until`` (its last beat plus ten heartbeats,
on Redis's clock); the hash itself stays as long as the leases it may have
held (``keep_ms``), so that a worker started on the same host after a slow
restart can still prove it gone and take its jobs back at once
(``worker/rescue.py``), rather than waiting out their leases.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

import redis

from . import junk, keys

Client = redis.Redis | redis.RedisCluster  # what broker.connection.connect() returns

Field = str | int  # what a worker's hash holds: text, JSON text and numbers

# A zset entry older than this belongs to a worker long gone: its hash has
# expired (it lives its lease past the last beat: an hour is a lease no
# one sets), only the index entry is left to trim.
STALE_AFTER_MS = 3_600_000


def beat(
    client: Client, worker_id: str, fields: Mapping[str, Field], ttl_ms: int, now_ms: int, keep_ms: int = 0
) -> None:
    """Write one worker's description: listed alive for ``ttl_ms`` more, kept ``keep_ms`` past that."""
    key = keys.worker_key(worker_id)
    pipe = client.pipeline(transaction=False)
    written: dict[str, Field] = {**fields, "alive_until": now_ms + ttl_ms}
    pipe.hset(key, mapping=written)  # type: ignore[arg-type]  # redis-py's Mapping is invariant in its key
    pipe.pexpire(key, ttl_ms + keep_ms)
    pipe.zadd(keys.WORKERS, {worker_id: now_ms})
    pipe.zremrangebyscore(keys.WORKERS, "-inf", now_ms - STALE_AFTER_MS)
    pipe.execute()


def remove(client: Client, worker_id: str) -> None:
    """A worker that stops cleanly leaves the listing at once, not when its hash expires."""
    pipe = client.pipeline(transaction=False)
    pipe.delete(keys.worker_key(worker_id))
    pipe.zrem(keys.WORKERS, worker_id)
    pipe.execute()


def live_workers(client: Client, host: str | None = None, lost: bool = False) -> list[dict[str, Any]]:
    """Every worker whose heartbeat has not expired, oldest first; with ``host``, only that host's.

    With ``lost``, also those whose heartbeats stopped but whose hash is kept
    for the leases they may hold: what the same-host rescue looks through.

    A worker's id starts with its host name, so the others' hashes are not read.
    An entry taskforge did not write (an id that is not UTF-8, a hash of junk)
    is left out with one warning naming its key (``junk.py``): every worker
    reads this listing, and one junk entry must not stop them all.
    """
    raw = junk.read(lambda: cast(list[bytes], client.zrange(keys.WORKERS, 0, -1)), keys.WORKERS, [])
    ids = junk.texts(raw, keys.WORKERS)
    if host is not None:
        ids = [worker_id for worker_id in ids if worker_id.startswith(host + ":")]
    if not ids:
        return []
    pipe = client.pipeline(transaction=False)
    for worker_id in ids:
        pipe.hgetall(keys.worker_key(worker_id))
    rows = pipe.execute(raise_on_error=False)
    now_ms = 0 if lost else redis_ms(client)
    listing = []
    for worker_id, fields in zip(ids, rows, strict=True):
        key = keys.worker_key(worker_id)
        fields = junk.reply(fields, key, {})
        entry = decode(fields, key) if fields else None
        # 0: a worker of an older version, listed as long as its hash lives.
        if entry is not None and (lost or not entry["alive_until"] or entry["alive_until"] >= now_ms):
            listing.append(entry)
    return listing


def redis_ms(client: Client) -> int:
    """Redis's clock, which wrote ``alive_until``: a reader's own clock may be off."""
    reply: Any = client.time()
    if isinstance(reply, dict):  # a cluster client asked several nodes: any one's clock
        reply = next(iter(reply.values()))
    seconds, micros = reply
    return int(seconds) * 1000 + int(micros) // 1000


def decode(fields: Mapping[bytes, bytes], key: str = keys.WORKERS) -> dict[str, Any] | None:
    """One worker's hash as plain data; fields a worker of an older version did not write get defaults.

    Junk in a field reads as its default; a hash with no readable ``id`` is
    no worker's (None). Either way the key is named once in the log.
    """
    data = {name: v for k, v in fields.items() if (name := junk.text(k, key)) is not None}
    worker_id = junk.text(data.get("id"), key)
    if not worker_id:
        junk.set_aside(key, "a worker entry without a readable id")
        return None

    def listed(name: str, default: object = "[]") -> Any:
        return junk.json_value(data.get(name, default), key, [], list)

    def number(name: str) -> int:
        return junk.number(data.get(name), key)

    def text(name: str) -> str:
        return junk.text(data.get(name), key) or ""

    tasks = data.get("tasks")
    return {
        "id": worker_id,
        "host": text("host"),
        "pid": number("pid"),
        "queues": _names(listed("queues")),
        "concurrency": number("concurrency"),
        "started_at": number("started_at"),
        "jobs_done": number("jobs_done"),
        "current": [job for job in listed("current") if isinstance(job, dict)],
        "heartbeat": number("heartbeat"),
        "alive_until": number("alive_until"),
        "clock_offset_ms": number("clock_offset_ms"),  # its wall clock minus Redis's
        # What other workers read: the tasks it serves, its claim tokens' prefix, what proves it gone.
        # None: a worker of an older version (or junk), tasks unknown.
        "tasks": None if tasks is None else _names(junk.json_value(tasks, key, None, list)),
        "owner": text("owner"),
        "boot": text("boot"),
        "pidns": text("pidns"),
        "processes": [p for p in listed("processes") if isinstance(p, list)],
    }


def _names(values: list[Any] | None) -> list[str] | None:
    return None if values is None else [v for v in values if isinstance(v, str)]
