"""Can this Redis lose jobs? What its own settings say: eviction, persistence, replicas.

taskforge never loses a job only while Redis keeps what it is given: a
server that evicts keys under memory pressure (``maxmemory-policy`` other
than ``noeviction``) deletes job records and queues, and a server that
neither appends to an AOF nor saves RDB snapshots forgets everything when
it restarts. With ``durability="replicated"`` a master without a replica
confirms no write at all. Nothing in Redis says so to a client, so the
worker (at start and every few minutes), ``taskforge status`` and the
dashboard ask, and say it in words.

The policy is read from ``INFO memory`` (``CONFIG GET`` only where INFO
lacks it), since managed Redis and the documented minimal ACL user deny or
rename ``CONFIG``. RDB snapshots are known only through ``CONFIG GET
save``, asked only while the AOF is off; when that is denied, persistence
is ``unknown`` (never an error, and never a warning: nothing proves a
risk), and the denial is one entry of the server's ACL LOG.

A Cluster is checked master by master (each reachable one); a Sentinel
client reaches the current master. ``memory://`` keeps nothing anyway and
is not checked.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import redis

UNKNOWN = "unknown"
DENIED = "settings unknown"  # the summary of a server that refused INFO
SAFE_POLICY = "noeviction"


@dataclass(frozen=True)
class ServerHealth:
    """What one Redis server (a master) says about how it keeps data."""

    server: str  # "host:port" of a cluster node; "" for the one server of a plain URL
    run_id: str  # changes on every restart of the server process
    policy: str  # maxmemory-policy, or "unknown"
    aof: bool
    rdb: bool | None  # RDB snapshots configured; None: CONFIG denied, cannot tell
    replicas: int

    @property
    def persistence(self) -> str:
        if self.aof:
            return "AOF" + (" and RDB" if self.rdb else "")
        return {True: "RDB", False: "none", None: UNKNOWN}[self.rdb]

    def warnings(self, replicated: bool) -> list[str]:
        """Each way this server can lose jobs, in words with the fix; [] when none is known."""
        where = f"Redis {self.server}" if self.server else "Redis"
        found = []
        if self.policy not in (SAFE_POLICY, UNKNOWN):
            found.append(
                f"{where} evicts keys under memory pressure (maxmemory-policy {self.policy}): it can delete "
                f"job records and queues; set maxmemory-policy {SAFE_POLICY}"
            )
        if not self.aof and self.rdb is False:
            found.append(
                f"{where} has no persistence (neither AOF nor RDB): a restart loses every job; "
                "set appendonly yes (or a save schedule)"
            )
        if replicated and self.replicas == 0:
            found.append(
                f"{where} has no replica, so durability='replicated' confirms no write: "
                "connect one (replicaof), or use durability='async'"
            )
        return found

    def summary(self) -> str:
        """One line for ``taskforge status``: the three facts, whatever they are."""
        where = f"{self.server}: " if self.server else ""
        return (
            f"{where}maxmemory-policy {self.policy}, persistence {self.persistence}, "
            f"{self.replicas} replica{'s' if self.replicas != 1 else ''}"
        )


def _config(client: Any, name: str, **target: Any) -> str | None:
    """One CONFIG value, or None when CONFIG is denied (ACL), renamed or disabled."""
    try:
        reply = client.config_get(name, **target)
    except (redis.ResponseError, redis.exceptions.NoPermissionError):
        return None
    if target and isinstance(reply, Mapping) and name not in reply:  # a cluster's reply, per node
        reply = next(iter(reply.values()), {})
    value = reply.get(name) if isinstance(reply, Mapping) else None
    return value.decode() if isinstance(value, bytes) else value


def _info(client: Any, **target: Any) -> dict[str, Any]:
    """INFO server, persistence, replication and memory, merged (one round trip each)."""
    merged: dict[str, Any] = {}
    for section in ("server", "persistence", "replication", "memory"):
        reply = client.info(section, **target)
        if target and reply and all(isinstance(v, Mapping) for v in reply.values()):
            reply = next(iter(reply.values()))  # a cluster's reply, keyed by node
        merged.update(reply)
    return merged


def check(client: Any, server: str = "", **target: Any) -> ServerHealth:
    """Ask one server (``target``: a cluster node, as redis-py's ``target_nodes``)."""
    info = _info(client, **target)
    aof = bool(int(info.get("aof_enabled", 0) or 0))
    # INFO says the policy; only the RDB schedule needs CONFIG, and only while the AOF is off:
    # a minimal ACL user (the documented line grants INFO, not CONFIG) is then asked nothing it may not run.
    policy = info.get("maxmemory_policy") or _config(client, "maxmemory-policy", **target) or UNKNOWN
    save = None if aof else _config(client, "save", **target)
    return ServerHealth(
        server=server,
        run_id=str(info.get("run_id", "")),
        policy=str(policy),
        aof=aof,
        rdb=None if save is None else bool(save.strip()),
        replicas=int(info.get("connected_slaves", 0) or 0),
    )


def check_servers(client: Any, url: str) -> list[ServerHealth]:
    """Every master this client uses: one for a plain or Sentinel URL, each reachable one of a Cluster."""
    if url.lower().startswith("memory"):
        return []
    if isinstance(client, redis.RedisCluster):
        found = []
        for node in client.get_primaries():
            try:
                found.append(check(client, f"{node.host}:{node.port}", target_nodes=node))
            except (redis.ConnectionError, redis.TimeoutError):
                continue  # an unreachable master is the cluster's failover to handle, not a setting
        return found
    return [check(client)]


def warnings(healths: list[ServerHealth], replicated: bool) -> list[str]:
    return [text for health in healths for text in health.warnings(replicated)]


def report(client: Any, url: str, replicated: bool) -> tuple[list[str], list[str]]:
    """(one summary line per server, the warnings) for ``taskforge status`` and the dashboard.

    A server that refuses INFO (an ACL) is summed up as ``unknown``: the
    reader shows the rest of its page, never an error.
    """
    try:
        healths = check_servers(client, url)
    except redis.ResponseError as exc:
        return [f"{DENIED} ({refusal(exc)})"], []
    return [health.summary() for health in healths], warnings(healths, replicated)


def refusal(exc: redis.ResponseError) -> str:
    """Why the server did not say, in words (an ACL's refusal is common: say what to grant)."""
    if isinstance(exc, redis.exceptions.NoPermissionError):
        return "this Redis user may not run INFO: grant +info to check eviction and persistence"
    return str(exc)
