"""Broker URLs for more than one Redis: ``redis+cluster://`` and ``redis+sentinel://``.

``redis+cluster://[user:password@]host:port[,host:port...][/0]`` gives redis-py's
cluster client: it learns the slot map from any node it can reach, sends each
queue's commands to the master of the queue's slot, and follows ``MOVED``
after a failover. A cluster has only database 0.

``redis+sentinel://[user:password@]host:port[,host:port...]/service[/db]``
asks the sentinels which node is the master of ``service`` and connects there;
when a connection fails, or the node answers as a replica, it asks again, so
clients follow a failover by themselves. The credentials are the master's;
the sentinels are reached without them.
"""

from __future__ import annotations

from typing import Any, cast
from urllib.parse import unquote, urlsplit

import redis
from redis.cluster import ClusterNode, RedisCluster
from redis.sentinel import Sentinel

from ..errors import ConfigurationError

CLUSTER = "redis+cluster"
SENTINEL = "redis+sentinel"
SCALED_SCHEMES = (CLUSTER, SENTINEL)


def is_scaled(url: str) -> bool:
    """True for a URL naming several nodes, whose master can move (a failover)."""
    return urlsplit(url).scheme in SCALED_SCHEMES


def _hosts(url: str, shown: str, netloc: str) -> list[tuple[str, int]]:
    """``host:port[,host:port...]`` from the part after the credentials."""
    hosts = []
    for item in netloc.split(","):
        host, sep, port = item.strip().rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ConfigurationError(
                f"broker URL {shown!r}: {item.strip()!r} is not host:port; write "
                f"{urlsplit(url).scheme}://host:port[,host:port...]"
            )
        hosts.append((host.strip("[]"), int(port)))
    return hosts


def _split(url: str, shown: str) -> tuple[dict[str, Any], list[tuple[str, int]], list[str]]:
    """(credentials, nodes, path segments) of a scaled URL."""
    parts = urlsplit(url)
    if parts.query or parts.fragment:
        raise ConfigurationError(f"broker URL {shown!r}: {parts.scheme}:// takes no query string or fragment")
    userinfo, _, netloc = parts.netloc.rpartition("@")
    if not netloc:
        raise ConfigurationError(f"broker URL {shown!r} names no host; write {parts.scheme}://host:port")
    credentials: dict[str, Any] = {}
    if userinfo:
        user, sep, password = userinfo.partition(":")
        if user:
            credentials["username"] = unquote(user)
        if sep:
            credentials["password"] = unquote(password)
    segments = [s for s in parts.path.split("/") if s]
    return credentials, _hosts(url, shown, netloc), segments


def _db(text: str, shown: str) -> int:
    if not text.isdigit():
        raise ConfigurationError(f"broker URL {shown!r}: database {text!r} is not a number")
    return int(text)


def cluster_target(url: str, shown: str) -> tuple[dict[str, Any], list[tuple[str, int]]]:
    """The credentials and nodes of a cluster URL (the sync and the async client read it alike)."""
    credentials, hosts, segments = _split(url, shown)
    if len(segments) > 1 or (segments and _db(segments[0], shown) != 0):
        raise ConfigurationError(
            f"broker URL {shown!r}: a Redis Cluster has only database 0; drop the path or write /0"
        )
    return credentials, hosts


def sentinel_target(url: str, shown: str) -> tuple[dict[str, Any], list[tuple[str, int]], str, int]:
    """The credentials, sentinels, service name and database of a sentinel URL."""
    credentials, hosts, segments = _split(url, shown)
    if not segments or len(segments) > 2:
        raise ConfigurationError(
            f"broker URL {shown!r}: name the service, as in redis+sentinel://host:port[,host:port...]/service[/db]"
        )
    db = _db(segments[1], shown) if len(segments) == 2 else 0
    return credentials, hosts, unquote(segments[0]), db


def cluster_client(url: str, shown: str, options: dict[str, Any]) -> RedisCluster:
    """A cluster client over the nodes of ``url`` (any reachable one is enough to start)."""
    credentials, hosts = cluster_target(url, shown)
    options = {k: v for k, v in options.items() if k != "health_check_interval"}
    return RedisCluster(
        # ``options["retry"]`` keeps redis-py's own retries short: taskforge
        # retries above it (enqueue, worker loops) with its own bounds.
        startup_nodes=[ClusterNode(host, port) for host, port in hosts],
        **credentials,
        **options,
    )


def sentinel_client(url: str, shown: str, options: dict[str, Any]) -> redis.Redis:
    """A client of the current master of the service ``url`` names, found through its sentinels."""
    credentials, hosts, service, db = sentinel_target(url, shown)
    # The sentinels get the short timeouts and retries too: redis-py's default
    # retries with backoff would make an unreachable set take ~25 s to report.
    shared = ("socket_connect_timeout", "socket_timeout", "retry")
    asking: dict[str, Any] = {k: options[k] for k in shared if k in options}
    sentinel = Sentinel(hosts, sentinel_kwargs=asking)
    # redis-py leaves master_for unannotated; it builds a redis.Redis bound to the master.
    return cast(redis.Redis, sentinel.master_for(service, db=db, **credentials, **options))
