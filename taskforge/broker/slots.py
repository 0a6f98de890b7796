"""What changes when the broker is a Redis Cluster, or when its master can move.

Every script runs in one queue's slot, so queue operations need nothing
special. Three things do:

- An idle worker serving several queues blocks on their wake lists, and one
  ``BLPOP`` cannot span slots. ``WakeWaiter`` runs one blocking pop per slot,
  side by side on threads, and returns as soon as any one is woken: no
  polling, and no wake-up is missed, since every enqueue pushes to the list of
  its own queue's slot.
- ``WAIT`` counts the replicas that have the writes of *this connection*, so it
  must follow the write on the same connection, to the master of the slot:
  ``write_then_wait`` sends both in one pipeline to that node.
- Pipelines of scripts over several queues (``peek``) go to several nodes,
  and redis-py's cluster pipeline refuses EVALSHA: ``script_per_node`` sends
  one plain pipeline per master, loading the script where a node that became
  master by a failover does not know it yet (``NOSCRIPT``).
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any, cast

import redis
from redis.cluster import RedisCluster
from redis.exceptions import NoScriptError

from .connection import with_scripts_loaded

POP_BLOCK = 1.0  # seconds each side-by-side pop blocks; below SOCKET_TIMEOUT


def is_cluster(client: Any) -> bool:
    return isinstance(client, RedisCluster)


def by_slot(client: Any, keys: Sequence[str]) -> list[list[str]]:
    """``keys`` grouped by hash slot, in first-seen order (one group without a cluster)."""
    if not is_cluster(client):
        return [list(keys)]
    groups: dict[int, list[str]] = {}
    for key in keys:
        groups.setdefault(client.keyslot(key), []).append(key)
    return list(groups.values())


def node_client(client: redis.Redis | RedisCluster, key: str) -> redis.Redis:
    """A plain client of the master serving ``key`` (``client`` itself without a cluster)."""
    if not isinstance(client, RedisCluster):
        return client
    node = client.get_node_from_key(key)
    if node.redis_connection is None:
        client.nodes_manager.initialize()
        node = client.get_node_from_key(key)
    # redis-py leaves ClusterNode unannotated; its redis_connection is a plain client.
    return cast(redis.Redis, node.redis_connection)


# Replies meaning the node is not (or no longer) the slot's master. redis-py
# turns MOVED and ASK into AskError (MovedError) with the code stripped.
_MOVED_ERRORS = (
    redis.exceptions.AskError,
    redis.exceptions.ReadOnlyError,
    redis.exceptions.ClusterDownError,
    redis.exceptions.TryAgainError,
)
_MOVED = ("MOVED", "ASK", "READONLY", "CLUSTERDOWN", "TRYAGAIN")


def slot_moved(exc: Exception) -> bool:
    """Whether ``exc`` says the node is not (or no longer) the master of the slot (sync and async alike)."""
    return isinstance(exc, _MOVED_ERRORS) or (isinstance(exc, redis.ResponseError) and str(exc).startswith(_MOVED))


def on_master(client: RedisCluster, key: str, call: Callable[[redis.Redis], Any]) -> Any:
    """``call(node)`` with the plain client of the master serving ``key``'s slot.

    Faster than the cluster client (measured: a command through it costs ~0.5
    ms of Python, through a node client ~0.08 ms), and what WAIT needs. When
    the node is gone or says the slot moved, the slot map is relearned and a
    ConnectionError raised: callers retry as through any outage.
    """
    try:
        return call(node_client(client, key))
    except (redis.ConnectionError, redis.TimeoutError) as exc:
        _refresh(client)
        raise redis.ConnectionError(f"the master of {key!r} is unreachable ({exc})") from None
    except redis.ResponseError as exc:
        if not slot_moved(exc):
            raise
        _refresh(client)
        raise redis.ConnectionError(f"the slot of {key!r} moved ({exc})") from None


def _refresh(client: RedisCluster) -> None:
    """Relearn the slot map: a replica may have taken over."""
    try:
        client.nodes_manager.initialize()
    except (redis.RedisError, redis.exceptions.RedisClusterException):
        pass  # the next call fails and gets here again


def write_then_wait(node: redis.Redis, script: Any, keys: list[str], args: list[Any], wait_ms: int) -> tuple[Any, int]:
    """Run ``script`` then ``WAIT 1 wait_ms`` on one connection: (script reply, replicas that acked).

    One round trip; ``node`` must be the master of the keys' slot.
    """
    reply, acked = _pipelined(node, script, [(keys, args)], wait_ms)
    return reply, int(acked)


def _pipelined(
    node: redis.Redis,
    script: Any,
    calls: list[tuple[list[str], list[Any]]],
    wait_ms: int | None = None,
    before: Callable[[Any], None] | None = None,
) -> list[Any]:
    """One pipeline of ``script`` calls (and a final WAIT); on NOSCRIPT, loads the script and sends again.

    A re-send is safe: NOSCRIPT means the script ran nowhere in this pipeline.
    ``before`` queues idempotent commands in front of the calls (their replies
    are dropped): work already done whose bookkeeping rides along.
    """

    def send() -> list[Any]:
        pipe = node.pipeline(transaction=False)
        head = queue_calls(pipe, script, calls, wait_ms, before)
        return list(pipe.execute()[head:])

    try:
        return send()
    except NoScriptError:
        return with_scripts_loaded(send, lambda: node.script_load(script.script))


def queue_calls(
    pipe: Any,
    script: Any,
    calls: list[tuple[list[str], list[Any]]],
    wait_ms: int | None = None,
    before: Callable[[Any], None] | None = None,
) -> int:
    """Queue ``script`` calls (after ``before``'s commands, and before a final ``WAIT 1``) on a sync
    or async pipeline: queueing does no I/O on either. Returns where the calls' replies start."""
    if before is not None:
        before(pipe)
    head = len(pipe.command_stack)
    for keys, args in calls:
        pipe.evalsha(script.sha, len(keys), *keys, *args)
    if wait_ms is not None:
        pipe.wait(1, wait_ms)
    return head


def script_after(
    client: redis.Redis, script: Any, calls: list[tuple[list[str], list[Any]]], before: Callable[[Any], None]
) -> list[Any]:
    """On one Redis: ``script`` calls behind the commands ``before`` queues, in one round trip."""
    return _pipelined(client, script, calls, before=before)


def script_per_node(client: Any, script: Any, calls: list[tuple[list[str], list[Any]]]) -> list[Any]:
    """Run ``script`` once per (keys, args), one pipeline per master, replies in call order.

    redis-py's cluster pipeline refuses EVALSHA, so each master gets a plain
    pipeline of its own: one round trip per master rather than per call. (On
    one Redis, one pipeline: sent as EVALSHA alone, it also skips the SCRIPT
    EXISTS round trip redis-py's pipelines make before every batch of scripts.)
    """
    if not is_cluster(client):
        return _pipelined(client, script, calls)
    groups: dict[str, tuple[str, list[int]]] = {}
    for index, (keys, _) in enumerate(calls):
        groups.setdefault(client.get_node_from_key(keys[0]).name, (keys[0], []))[1].append(index)
    replies: list[Any] = [None] * len(calls)
    for key, indexes in groups.values():
        batch = [calls[j] for j in indexes]
        answers = on_master(client, key, functools.partial(_pipelined, script=script, calls=batch))
        for index, reply in zip(indexes, answers, strict=True):
            replies[index] = reply
    return replies


class WakeWaiter:
    """Block until any of several wake lists, in different slots, gets a token.

    Pops still blocking when ``wait`` returns are kept and reused by the next
    call rather than started again, so there is at most one per slot; each
    ends by itself within ``POP_BLOCK``. A token such a pop takes after its
    caller moved on is a wake-up spent: another idle worker notices the job
    within ``POP_BLOCK`` at worst, when its own pop times out.
    """

    def __init__(self, client: Any, groups: list[list[str]]) -> None:
        self.client = client
        self.groups = groups
        self.pool = ThreadPoolExecutor(max_workers=len(groups), thread_name_prefix="taskforge-wake")
        self.inflight: dict[int, Future[Any]] = {}
        self.lock = threading.Lock()

    def wait(self, timeout: float) -> bool:
        """Whether a token came within ``timeout``; a pop that ends empty before then is started again.

        (Returning at the first pop to end, empty, made a 30 s wait end
        after at most ``POP_BLOCK``: a pop kept from an earlier call timed
        out first.)
        """
        deadline = time.monotonic() + max(timeout, 0.001)
        with self.lock:
            while True:
                for index, group in enumerate(self.groups):
                    if index not in self.inflight:
                        self.inflight[index] = self.pool.submit(self.client.blpop, group, timeout=POP_BLOCK)
                left = max(deadline - time.monotonic(), 0.001)
                wait(list(self.inflight.values()), timeout=left, return_when=FIRST_COMPLETED)
                woken = False
                error: BaseException | None = None
                for index, future in list(self.inflight.items()):
                    if future.done():
                        del self.inflight[index]
                        exc = future.exception()
                        if exc is not None:
                            error = exc
                        elif future.result() is not None:
                            woken = True
                if woken:
                    return True
                if error is not None:
                    raise error
                if time.monotonic() >= deadline:
                    return False

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)
