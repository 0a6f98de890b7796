"""What every role of a broker shares: one client, its scripts, the settings, and how errors read.

A ``Broker`` (``compose.py``) is a few role objects (``Jobs``, ``Claims``,
``WorkflowStore``, ``Inspection``, ``Cleanup``), each built over the same
``Link``: the client and its registered scripts, whether it is a cluster,
the retention settings, the error translation (``guard``), the failover
retries (``durability.Durability``) and the little a client remembers
between calls (``hints.ClaimHints``, ``stats.Tally``). A role copies the
parts it uses at construction, so its method bodies read them as plain
attributes: no call layer between a role and its scripts.
"""

from __future__ import annotations

from contextlib import AbstractContextManager

import redis

from .cleanup import RetentionCounts
from .connection import OnError
from .damage import queue_errors
from .durability import FAILOVER_RETRY_S, Durability
from .hints import ClaimHints
from .plan import Settings
from .scaled import is_scaled
from .scripts import Scripts
from .slots import is_cluster
from .stats import Tally


class Link:
    """One app's connection to Redis, shared by the roles of its ``Broker``."""

    def __init__(
        self,
        client: redis.Redis | redis.RedisCluster,
        url: str,
        retention_ms: int,
        dead_retention_ms: int,
        durability: str = "async",
    ) -> None:
        self.client = client
        self.url = url
        self.retention_ms = retention_ms
        self.dead_retention_ms = dead_retention_ms
        self.retention_count = RetentionCounts()  # filled in by the app (TaskForge's retention_count)
        self.scripts = Scripts(client, replicated=durability == "replicated")
        self.cluster = is_cluster(client)
        # fakeredis runs a pipelined BLPOP without blocking, so memory:// waits the plain way.
        self.pipelined_wait = isinstance(client, redis.Redis) and not url.startswith("memory:")
        self.hints = ClaimHints(client, self.scripts)
        self.tally = Tally(client)
        self.durability = Durability(client, url, self.scripts, self.guard, FAILOVER_RETRY_S if is_scaled(url) else 0.0)
        self.settings = Settings(
            url,
            retention_ms,
            self.cluster,
            self.scripts.replicated,
            self.durability.failover_retry_s,
            self.durability.known_queues,
            self.hints.knows_limits,
        )

    def guard(self, *queues: str) -> AbstractContextManager[None]:
        """Redis errors as taskforge errors; damage to these queues' fixed keys as ``CorruptQueue``."""
        return OnError(queue_errors, self.client, self.url, queues)
