"""The queue's Lua scripts: read once from ``lua/*.lua``, called by SHA.

redis-py's ``Script`` sends ``EVALSHA`` and, on ``NOSCRIPT`` (Redis restarted,
failed over, or ``SCRIPT FLUSH``), loads the source and retries: a worker
never dies because Redis forgot a script.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Any

import redis

from .keys import QueueKeys

SCRIPT_NAMES = (
    "enqueue",
    "dequeue",
    "succeed",
    "fail",
    "extend",
    "reclaim",
    "requeue",
    "cancel",
    "retry_dead",
    "purge",
    "await",
    "adopt",
    "peek",
    "progress",
    "fast_forward",
    "abort",
    "abandon",
)


@cache
def script_source(name: str) -> str:
    """The full text of one script: the shared library, then its own body.

    Cached because package files never change while a process runs; the
    result is an immutable str.
    """
    lua = resources.files(__package__).joinpath("lua")
    lib = lua.joinpath("_lib.lua").read_text(encoding="utf-8")
    body = lua.joinpath(f"{name}.lua").read_text(encoding="utf-8")
    return f"{lib}\n{body}"


class Scripts:
    """The scripts registered on one Redis client; one instance per app connection."""

    def __init__(self, client: redis.Redis) -> None:
        self._scripts = {name: client.register_script(script_source(name)) for name in SCRIPT_NAMES}

    def call(self, name: str, queue: QueueKeys, *args: Any, client: Any = None) -> Any:
        """Run script ``name`` on ``queue``: KEYS is its pending key, ARGV its prefix + args.

        ``client`` may be a pipeline, to batch several calls in one round trip.
        """
        return self._scripts[name](keys=[queue.pending], args=[queue.prefix, *args], client=client)
