"""The queue's Lua scripts: read once from ``lua/*.lua``, called by SHA.

redis-py's ``Script`` sends ``EVALSHA`` and, on ``NOSCRIPT`` (Redis restarted,
failed over, or ``SCRIPT FLUSH``), loads the source and retries: a worker
never dies because Redis forgot a script.
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources
from typing import Any

import redis
from redis.cluster import RedisCluster

from .compat import describe_script_denial
from .keys import QueueKeys
from .slots import is_cluster, on_master

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


# A top-level definition in _lib.lua: `local NAME = ...` or `local function NAME(`.
_DEFINITION = re.compile(r"^local (?:function )?([A-Za-z_][A-Za-z0-9_]*)")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _lib_chunks(lib: str) -> list[tuple[str, str]]:
    """Split the library into (name, text) definitions, each with the comment above it.

    A definition runs on to the next one; blank and comment lines between two
    go with the second.
    """
    chunks: list[tuple[str, list[str]]] = []
    pending: list[str] = []  # comment and blank lines not yet given to a definition
    for line in lib.splitlines():
        match = _DEFINITION.match(line)
        if match:
            chunks.append((match.group(1), [*pending, line]))
            pending = []
        elif line.startswith("--") or not line.strip():
            pending.append(line)
        elif chunks:  # the continuation of a definition
            chunks[-1][1].extend([*pending, line])
            pending = []
    return [(name, "\n".join(lines)) for name, lines in chunks]


def _needed(chunks: list[tuple[str, str]], body: str) -> str:
    """The definitions ``body`` uses, directly or through each other, in library order.

    Redis runs the whole text of a script on every call, so each helper it
    defines is a closure built per call: a script that carried the whole
    library paid for every helper it never used (measured: most of the
    fixed cost of a small script).
    """
    defined = {name for name, _ in chunks}
    wanted: set[str] = set()
    todo = set(_WORD.findall(body)) & defined
    texts = dict(chunks)
    while todo:
        name = todo.pop()
        wanted.add(name)
        todo |= (set(_WORD.findall(texts[name])) & defined) - wanted - {name}
    return "\n".join(text for name, text in chunks if name in wanted)


@cache
def script_source(name: str) -> str:
    """The full text of one script: the library definitions it needs, then its own body.

    Cached because package files never change while a process runs; the
    result is an immutable str.
    """
    lua = resources.files(__package__).joinpath("lua")
    lib = lua.joinpath("_lib.lua").read_text(encoding="utf-8")
    body = lua.joinpath(f"{name}.lua").read_text(encoding="utf-8")
    return f"{_needed(_lib_chunks(lib), body)}\n{body}"


class Scripts:
    """The scripts registered on one Redis client; one instance per app connection."""

    def __init__(self, client: redis.Redis | RedisCluster) -> None:
        self._client = client
        self._cluster = is_cluster(client)
        self._scripts = {name: client.register_script(script_source(name)) for name in SCRIPT_NAMES}

    def call(self, name: str, queue: QueueKeys, *args: Any, client: Any = None) -> Any:
        """Run script ``name`` on ``queue``: KEYS is its pending key, ARGV its prefix + args.

        ``client`` may be a pipeline, to batch several calls in one round trip.
        In a cluster, the call goes straight to the master of the queue's slot.
        """
        script = self._scripts[name]
        keys, argv = [queue.pending], [queue.prefix, *args]
        try:
            if client is None and self._cluster:
                return on_master(self._client, queue.pending, lambda node: script(keys=keys, args=argv, client=node))
            return script(keys=keys, args=argv, client=client)
        except redis.ResponseError as exc:
            denied = denied_in_script(name, str(exc))
            if denied is None:
                raise
            raise redis.exceptions.NoPermissionError(denied) from None

    def script(self, name: str) -> Any:
        """The redis-py ``Script`` object of ``name`` (its ``sha`` and source)."""
        return self._scripts[name]


def denied_in_script(name: str, message: str) -> str | None:
    """For an ACL denial inside script ``name``: which command was denied (each server words it differently)."""
    return describe_script_denial(name, message, script_source(name))
