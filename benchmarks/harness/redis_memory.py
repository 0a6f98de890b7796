"""Redis memory per job (issue #50): what a queued job and a finished one cost the server.

An untimed pass per library, on the queue database of the harness's Redis:

    flush both databases, read ``used_memory``          the empty database
    N jobs through the library's normal API, no worker  -> bytes per QUEUED job
    drain them with the library's worker, stop it,
    flush the counter database                          -> bytes per FINISHED job kept

Each figure is the ``used_memory`` delta over N, so it holds everything the
jobs cost: their keys, the keyspace's tables and expiry entries, the
allocator's rounding. "Finished" is what the library's default keeps after
a drain: taskforge its records for the default retention, RQ its jobs for
500 s (``result_ttl``), Huey and Dramatiq nothing (a no-op's ``None`` is not
stored). Script bodies (``used_memory_scripts``) are left out: one fixed
cost per server, loaded by whichever pass ran first.

To attribute the bytes, every key of the queue database is grouped by kind
(the key with its ids replaced by ``*``) and measured with ``MEMORY USAGE
... SAMPLES 0`` (the key, its value and its keyspace entry); what no key
holds is the keyspace's hash tables, expiry entries and allocator slack.
For the per-job records (a kind with about one key per job), the fields of
one sample and the size of each value are kept too.

``used_memory`` is server-wide: the figures are clean only when nothing else
writes to that Redis. Other clients connected at the time are counted and
reported (``--redis`` a private ``redis-server`` avoids them).
"""

from __future__ import annotations

import re
import time
from typing import Any

from .peers import Peer
from .resp import Redis, RedisError
from .workloads import Bench, WorkloadError

SCAN_COUNT = 1000
SETTLE_TIMEOUT = 10.0
# A run of id-like characters inside a key: a uuid, a hex digest, a long number, a base32 id.
ID_LIKE = re.compile(r"[0-9A-Za-z_-]{20,}|[0-9a-fA-F-]{16,}|\d{6,}")


def key_kind(key: str) -> str:
    """The key with its ids replaced by ``*``: ``rq:job:<uuid>`` -> ``rq:job:*``."""
    return ID_LIKE.sub("*", key)


def data_memory(redis: Redis) -> tuple[int, dict[str, str]]:
    """``used_memory`` without the script cache, and the memory section it came from."""
    info = redis.info("memory")
    return int(info["used_memory"]) - int(info.get("used_memory_scripts", 0)), info


def settled_memory(redis: Redis, clients: int) -> int:
    """``used_memory`` once lazy frees are done and the library's connections are gone (bounded wait).

    A client's buffers count in ``used_memory``: a driver or worker that has
    not yet hung up would be counted as the jobs' bytes.
    """
    deadline = time.monotonic() + SETTLE_TIMEOUT
    while True:
        used, info = data_memory(redis)
        connected = int(redis.info("clients")["connected_clients"])
        if (int(info.get("lazyfree_pending_objects", 0)) == 0 and connected <= clients) or (
            time.monotonic() > deadline
        ):
            return used
        time.sleep(0.05)


def key_kinds(redis: Redis, jobs: int) -> dict[str, dict[str, Any]]:
    """Kind -> keys, bytes (sum of MEMORY USAGE), type, encoding, and for per-job records a sample's fields."""
    kinds: dict[str, dict[str, Any]] = {}
    samples: dict[str, bytes] = {}
    cursor: object = b"0"
    while True:
        reply = redis.call("SCAN", cursor, "COUNT", SCAN_COUNT)
        assert isinstance(reply, list)
        cursor, keys = reply[0], reply[1]
        usages = redis.pipeline([("MEMORY", "USAGE", key, "SAMPLES", 0) for key in keys])
        for key, usage in zip(keys, usages, strict=True):
            if not isinstance(usage, int):
                continue  # gone since the SCAN
            kind = key_kind(key.decode(errors="replace"))
            entry = kinds.setdefault(kind, {"keys": 0, "bytes": 0})
            entry["keys"] += 1
            entry["bytes"] += usage
            samples.setdefault(kind, key)
        if cursor in (b"0", "0", 0):
            break
    for kind, entry in kinds.items():
        sample = samples[kind]
        kind_type, encoding = redis.pipeline([("TYPE", sample), ("OBJECT", "ENCODING", sample)])
        entry["type"] = kind_type if isinstance(kind_type, str) else "?"
        entry["encoding"] = encoding.decode() if isinstance(encoding, bytes) else "?"
        entry["bytes_per_key"] = round(entry["bytes"] / entry["keys"], 1)
        entry["bytes_per_job"] = round(entry["bytes"] / jobs, 1) if jobs else None
        if entry["type"] == "hash" and entry["keys"] >= jobs / 2:
            entry["sample_fields"] = hash_fields(redis, sample)
    return dict(sorted(kinds.items(), key=lambda kv: -kv[1]["bytes"]))


def hash_fields(redis: Redis, key: bytes) -> dict[str, int]:
    """One record's fields and the bytes of each value: where a record's bytes go."""
    flat = redis.call("HGETALL", key)
    assert isinstance(flat, list)
    return {name.decode(errors="replace"): len(value) for name, value in zip(flat[::2], flat[1::2], strict=True)}


def attributed(kinds: dict[str, dict[str, Any]], delta: int, jobs: int) -> dict[str, Any]:
    """The part of the delta in keys and the part in none (keyspace tables, expiry entries, slack)."""
    in_keys = sum(entry["bytes"] for entry in kinds.values())
    return {
        "bytes_in_keys_per_job": round(in_keys / jobs, 1),
        "bytes_outside_keys_per_job": round((delta - in_keys) / jobs, 1),
    }


def other_clients(bench: Bench, clients: int) -> int:
    return max(0, int(bench.queue.info("clients")["connected_clients"]) - clients)


def measure_state(bench: Bench, base: int, clients: int, n: int) -> dict[str, Any]:
    """The memory delta of what the queue database holds now, per job, with its key kinds."""
    used = settled_memory(bench.queue, clients)
    kinds = key_kinds(bench.queue, n)
    out: dict[str, Any] = {
        "bytes_per_job": round((used - base) / n, 1),
        "keys": sum(entry["keys"] for entry in kinds.values()),
        **attributed(kinds, used - base, n),
        "kinds": kinds,
    }
    out["other_clients"] = other_clients(bench, clients)
    return out


def memory_per_job(bench: Bench, peer: Peer, n: int) -> tuple[dict[str, Any], list[str]]:
    """Bytes per queued job and per finished job kept by the library's default, with the breakdown."""
    bench.flush()
    clients = int(bench.queue.info("clients")["connected_clients"])
    base = settled_memory(bench.queue, clients)
    out: dict[str, Any] = {"n": n, "empty_used_memory": base}
    try:
        bench.driver(peer, "enqueue", n, "--no-floor")
        out["queued"] = measure_state(bench, base, clients, n)
        worker = bench.worker(peer, n, "memory")
        try:
            bench.drain(worker, n)
        finally:
            worker.stop(bench.s.stop_grace)
        bench.flush(queue=False)  # the completion counter's few keys are the harness's
        out["finished"] = measure_state(bench, base, clients, n)
    except (WorkloadError, RedisError, OSError) as exc:
        return out, [f"memory: {type(exc).__name__}: {exc}"]
    finally:
        bench.flush()
    return out, []
