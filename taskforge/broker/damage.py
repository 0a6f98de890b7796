"""Naming the damage when a queue's fixed keys hold what taskforge never wrote.

A key such as ``pending`` overwritten with a string (by a script, a
``redis-cli`` typo, another program sharing the database) makes Redis answer
a bare ``WRONGTYPE`` that names no key. The scripts stop before their first
write when that happens (``need_zsets`` in lua/lib/damage.lua); this module then
looks at the queue's fixed keys, only on that error path, and says which one
is broken and how to mend it, as a ``CorruptQueue``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager

import redis

from ..errors import CorruptQueue
from . import keys
from .connection import broker_errors
from .keys import QueueKeys, deferred_key

# The pending score is priority band + sequence (lua/lib/keys.lua): past the band
# width the sequence would spill into the next priority.
SEQ_LIMIT = 2**50 - 1_000_000


def expected_types(queue: str) -> dict[str, str]:
    """Every fixed key of ``queue``, with the Redis type taskforge keeps there."""
    q = QueueKeys(queue)
    return {
        q.pending: "zset",
        q.scheduled: "zset",
        q.running: "zset",
        q.dead: "zset",
        deferred_key(q): "zset",
        q.seq: "string",
        q.wake: "list",
        q.limits: "hash",
        q.turns: "zset",
        q.held: "zset",
        q.key_limits: "hash",
        q.held_head: "hash",
        q.lane_size: "hash",
        q.key_turns: "hash",
        q.prefix + "key_turns_at": "string",
    }


def find_damage(client: redis.Redis | redis.RedisCluster, queues: Iterable[str]) -> CorruptQueue | None:
    """What is wrong with the fixed keys of ``queues`` (and the global queue set), or None when all are sound."""
    queues = list(queues)
    expected = {keys.QUEUES: "set"}
    owner: dict[str, tuple[str, ...]] = {keys.QUEUES: tuple(queues)}
    for queue in queues:
        for key, kind in expected_types(queue).items():
            expected[key] = kind
            owner[key] = (queue,)
    pipe = client.pipeline(transaction=False)
    for key in expected:
        pipe.type(key)
    kinds = [k.decode() if isinstance(k, bytes) else str(k) for k in pipe.execute()]
    found: list[str] = []
    damaged: dict[str, None] = {}
    for (key, want), kind in zip(expected.items(), kinds, strict=True):
        problem = _problem(client, key, want, kind)
        if problem:
            found.append(problem)
            damaged.update(dict.fromkeys(owner[key]))
    if not found:
        return None
    return CorruptQueue(
        "a queue is damaged: " + "; ".join(found) + ". Nothing was stored or moved. Something other than "
        "taskforge wrote these keys; inspect them (redis-cli TYPE / GET), move any jobs you need out of "
        "the way, and DEL the key: taskforge recreates it.",
        tuple(damaged),
    )


def _problem(client: redis.Redis | redis.RedisCluster, key: str, want: str, kind: str) -> str | None:
    if kind not in (want, "none"):
        return f"{key} is a {kind}, where taskforge keeps a {want}"
    if key.endswith(":seq") and kind == "string":
        raw = client.get(key) or b""
        try:
            value = int(raw)
        except ValueError:
            return f"{key} holds {raw[:40]!r}, not a sequence number"
        if value >= SEQ_LIMIT:
            return f"{key} is exhausted ({value} >= {SEQ_LIMIT})"
    return None


@contextmanager
def queue_errors(client: redis.Redis | redis.RedisCluster, url: str, queues: Iterable[str] = ()) -> Iterator[None]:
    """``broker_errors``, plus: a Redis error that comes from damaged fixed keys becomes ``CorruptQueue``."""
    try:
        with broker_errors(url):
            yield
    except redis.ResponseError:
        with broker_errors(url):
            damage = find_damage(client, queues)
        if damage is not None:
            raise damage from None
        raise
