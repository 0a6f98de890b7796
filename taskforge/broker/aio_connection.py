"""From a broker URL to a ``redis.asyncio`` client, with the sync side's timeouts, retries and checks.

The schemes are ``connection.py``'s. ``memory://`` is fakeredis's async
client over the very ``FakeServer`` of the app's sync client: ``memory://``
is private to the app that opened it, and a job stored by ``adelay()`` must
be the one ``app.drain()`` runs. Cluster and Sentinel get redis.asyncio's
own clients, which follow ``MOVED`` and ask the sentinels again after a
failover, as the sync ones do.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, cast

import redis.asyncio as aioredis
from redis.asyncio.cluster import ClusterNode
from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import Sentinel
from redis.backoff import ExponentialBackoff

from ..errors import ConfigurationError
from ._async.handshake import try_once, version_check
from .compat import SERVER_TICK, block_timeout
from .connection import CONNECT_TIMEOUT, SOCKET_TIMEOUT, quiet_handshake, redact, url_scheme
from .scaled import CLUSTER, SCALED_SCHEMES, SENTINEL, cluster_target, sentinel_target

AsyncClient = aioredis.Redis | AsyncRedisCluster

# Per task, not per thread: many producers share one loop, and only the one
# inside ``sent_once()`` must see its command sent once.
_once: contextvars.ContextVar[bool] = contextvars.ContextVar("taskforge_sent_once", default=False)


@contextmanager
def sent_once() -> Iterator[None]:
    """Commands of the current task are sent at most once (see ``connection.sent_once``).

    A plain enqueue is not idempotent as sent; the caller re-sends it itself,
    marked as a re-send, instead of redis-py sending the same arguments again.
    """
    token = _once.set(True)
    try:
        yield
    finally:
        _once.reset(token)


class OnceRetry(Retry):
    """redis.asyncio's retry, except inside ``sent_once()``, where a failed command is raised, not re-sent."""

    async def call_with_retry(self, do: Any, fail: Any, *args: Any, **kwargs: Any) -> Any:
        if not _once.get():
            return await super().call_with_retry(do, fail, *args, **kwargs)
        return await try_once(self._supported_errors, do, fail, kwargs)


def aconnect(url: str, memory: Any = None) -> AsyncClient:
    """An async client for ``url``; ``memory``: the app's sync fakeredis client, whose server it shares.

    Nothing is sent yet: every client here connects on its first command, so
    building one never blocks the loop.
    """
    scheme = url_scheme(url)
    shown = redact(url)
    if scheme == "memory":
        return _memory_client(memory)
    options: dict[str, Any] = {
        "socket_connect_timeout": CONNECT_TIMEOUT,
        "socket_timeout": SOCKET_TIMEOUT,
        "health_check_interval": 30,
        "retry": OnceRetry(ExponentialBackoff(cap=0.5, base=0.05), 2),
    }
    if scheme not in SCALED_SCHEMES:
        options.update(quiet_handshake(shown), redis_connect_func=version_check(shown))
    if scheme != "unix":
        options["socket_keepalive"] = True
    try:
        if scheme == CLUSTER:
            return _cluster_client(url, shown, options)
        if scheme == SENTINEL:
            return _sentinel_client(url, shown, options)
        return aioredis.Redis.from_url(url, **options)
    except ValueError as exc:
        raise ConfigurationError(f"broker URL {shown!r} is invalid: {redact(str(exc))}") from None


def _memory_client(sync_client: Any) -> aioredis.Redis:
    from fakeredis import FakeAsyncRedis

    kwargs = getattr(getattr(sync_client, "connection_pool", None), "connection_kwargs", {})
    server = kwargs.get("server")
    if server is None:
        raise ConfigurationError("memory:// from async code needs the app's own memory broker to share")
    return FakeAsyncRedis(server=server, version=kwargs.get("version", (7,)))


def _cluster_client(url: str, shown: str, options: dict[str, Any]) -> AsyncRedisCluster:
    credentials, hosts = cluster_target(url, shown)
    options = {k: v for k, v in options.items() if k != "health_check_interval"}
    return AsyncRedisCluster(startup_nodes=[ClusterNode(host, port) for host, port in hosts], **credentials, **options)


def _sentinel_client(url: str, shown: str, options: dict[str, Any]) -> aioredis.Redis:
    credentials, hosts, service, db = sentinel_target(url, shown)
    shared = ("socket_connect_timeout", "socket_timeout", "retry")
    asking: dict[str, Any] = {k: options[k] for k in shared if k in options}
    sentinel = Sentinel(hosts, sentinel_kwargs=asking)  # type: ignore[no-untyped-call, unused-ignore]
    return cast(aioredis.Redis, sentinel.master_for(service, db=db, **credentials, **options))


def client_connections(client: Any) -> Iterator[Any]:
    """Every connection a client holds: its pool's (free and in use), or, in a cluster, each node's."""
    pool = getattr(client, "connection_pool", None)
    yield from getattr(pool, "_available_connections", ())
    yield from list(getattr(pool, "_in_use_connections", ()))
    manager = getattr(client, "nodes_manager", None)
    known = (*getattr(manager, "startup_nodes", {}).values(), *getattr(manager, "nodes_cache", {}).values())
    nodes = {id(node): node for node in known}
    for node in nodes.values():
        yield from getattr(node, "_connections", ())


def drop_connection(connection: Any) -> None:
    """Close a connection whose loop is closed: its socket directly, since nothing can await it closed any more.

    The transport is marked closing (its ``close()`` fails when it comes to
    the loop), then its socket is closed as the loop would have done it
    (asyncio's selector transports keep it as ``_sock``); other transports
    close their socket when collected. The connection then reads as
    never connected, so nothing warns of it again. ``memory://``'s fake
    socket is taken off its in-process server, which would keep it forever.
    """
    transport: Any = getattr(getattr(connection, "_writer", None), "transport", None)
    if hasattr(transport, "close"):  # not fakeredis's, which has no socket
        try:
            transport.close()  # marks it closing; the rest of it needs the loop
        except RuntimeError:  # "Event loop is closed"
            pass
        sock = getattr(transport, "_sock", None)
        if sock is not None:
            sock.close()
            transport._sock = None
    fake = getattr(connection, "_sock", None)
    if fake is not None and hasattr(fake, "responses"):  # fakeredis's socket over its FakeServer
        fake.close()
        connection._sock = None
    if getattr(connection, "_writer", None) is not None:
        connection._writer = connection._reader = None


def abandon_client(client: Any) -> None:
    """``client.aclose()`` for a client whose loop is closed: every connection dropped, a cluster's topology too."""
    for connection in list(client_connections(client)):
        drop_connection(connection)
    manager = getattr(client, "nodes_manager", None)
    if manager is not None:  # what the cluster client's aclose() marks: closed, to learn the nodes again if used
        manager.default_node = None
        client._initialize = True


async def wait_for_list(client: Any, key: str, timeout: float, memory: bool = False) -> bool:
    """``compat.wait_for_list`` awaited: the list moved onto itself (so many may wait), or, under a tick, a look.

    ``memory``: fakeredis answers BLMOVE at once instead of blocking (a wait
    would spin the loop), but blocks on BRPOPLPUSH, the same move by its
    older name; a real server gets BLMOVE, which a minimal ACL user may run.
    """
    if timeout < SERVER_TICK:
        await asyncio.sleep(max(timeout, 0.0))
        return bool(await client.exists(key))
    if memory:
        return await client.brpoplpush(key, key, timeout=block_timeout(timeout)) is not None
    moved = await client.blmove(key, key, timeout=block_timeout(timeout), src="RIGHT", dest="LEFT")
    return moved is not None
