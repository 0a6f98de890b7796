"""Deleting a whole queue (``taskforge purge``'s last step, and the tests' clean slate).

Kept out of ``queue.py``: it is no state transition, only a careful walk of
the queue's keys that never blocks Redis.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

import redis

from .keys import QueueKeys


class Cleanup:
    """Mixed into ``Broker``; needs its ``client`` and ``guard``."""

    if TYPE_CHECKING:
        client: redis.Redis | redis.RedisCluster
        guard: Callable[..., AbstractContextManager[None]]

    def clear(self, queue: str) -> int:
        """Delete every key of ``queue`` (SCAN + UNLINK: never blocks Redis on a big queue)."""
        pattern = glob_literal(QueueKeys(queue).prefix) + "*"
        removed = 0
        with self.guard(queue):
            batch: list[bytes] = []
            client = self.client
            where = (
                {"target_nodes": client.get_node_from_key(QueueKeys(queue).pending)}
                if isinstance(client, redis.RedisCluster)
                else {}
            )
            for key in self.client.scan_iter(match=pattern, count=500, **where):
                batch.append(key)
                if len(batch) >= 500:
                    removed += self.client.unlink(*batch)
                    batch = []
            if batch:
                removed += self.client.unlink(*batch)
        return removed


def glob_literal(text: str) -> str:
    """``text`` as a SCAN MATCH pattern that matches only itself: the backslash, Redis's escape, first."""
    for special in ("\\", "[", "]", "?", "*"):
        text = text.replace(special, "\\" + special)
    return text
