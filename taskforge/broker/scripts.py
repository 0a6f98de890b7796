"""The queue's Lua scripts: read once from ``lua/*.lua``, called by SHA.

What each script takes and answers is in ``calls.py``; this module sends
those calls: one at a time, several in a pipeline, or followed by ``WAIT``.

redis-py's ``Script`` sends ``EVALSHA`` and, on ``NOSCRIPT`` (Redis restarted,
failed over, or ``SCRIPT FLUSH``), loads the source and retries: a worker
never dies because Redis forgot a script.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from functools import cache
from importlib import resources
from typing import Any, TypeVar

import redis
from redis.cluster import RedisCluster

from .calls import CALLS, ScriptCall
from .compat import describe_script_denial
from .connection import OnError, run_script
from .direct import Direct
from .record import lua_definitions
from .slots import is_cluster, on_master, script_per_node, write_then_wait

T = TypeVar("T")
# How long a write with durability="replicated" waits for a replica to confirm it.
REPLICA_WAIT_MS = 1000

SCRIPT_NAMES = tuple(CALLS)


# A top-level definition in a ``lua/lib/*.lua`` file: `local NAME = ...` or `local function NAME(`.
_DEFINITION = re.compile(r"^local (?:function )?([A-Za-z_][A-Za-z0-9_]*)")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# What is not code in Lua: comments and string literals.
_NOT_CODE = re.compile(
    r"--\[(=*)\[.*?\]\1\]"  # a long comment
    r"|--[^\n]*"  # a line comment
    r"|\[(=*)\[.*?\]\2\]"  # a long string
    r"|'(?:\\.|[^'\\\n])*'"  # quoted strings
    r'|"(?:\\.|[^"\\\n])*"',
    re.S,
)


def _lib_chunks(lib: str) -> list[tuple[str, str]]:
    """Split one library file into (name, text) definitions, each with the comment above it.

    A definition runs on to the next one; blank and comment lines between two
    go with the second. The file's opening comment, up to its first blank
    line, speaks of the file as a whole and goes into no script.
    """
    chunks: list[tuple[str, list[str]]] = []
    pending: list[str] = []  # comment and blank lines not yet given to a definition
    for line in lib.splitlines():
        match = _DEFINITION.match(line)
        if match:
            chunks.append((match.group(1), [*pending, line]))
            pending = []
        elif not chunks and not line.strip():
            pending = []  # the end of the file's opening comment
        elif line.startswith("--") or not line.strip():
            pending.append(line)
        elif chunks:  # the continuation of a definition
            chunks[-1][1].extend([*pending, line])
            pending = []
    return [(name, "\n".join(lines)) for name, lines in chunks]


@cache
def code_names(text: str) -> frozenset[str]:
    """The names ``text`` uses as code: its words outside comments and string literals."""
    return frozenset(_WORD.findall(_NOT_CODE.sub(" ", text)))


def library_files() -> dict[str, str]:
    """The text of each ``lua/lib/*.lua`` file by its name, in name order."""
    lib = resources.files(__package__).joinpath("lua").joinpath("lib")
    files = sorted((entry for entry in lib.iterdir() if entry.name.endswith(".lua")), key=lambda entry: entry.name)
    return {entry.name: entry.read_text(encoding="utf-8") for entry in files}


@cache
def library() -> tuple[tuple[str, str], ...]:
    """Every definition a script may use, as (name, text), in library order.

    The job record's (``record.lua_definitions``: positions and field lists),
    then each ``lua/lib/*.lua`` file's, the files in name order: the order
    is the same on every run, so a script's text and its SHA are too. A
    file is a room of one concern; which file a definition sits in is free,
    since ``_needed`` puts each one after those it uses. A name defined
    twice would silently hide one of them, so it is refused here.
    """
    chunks = [*lua_definitions(), *(c for text in library_files().values() for c in _lib_chunks(text))]
    twice = sorted(name for name, n in Counter(name for name, _ in chunks).items() if n > 1)
    if twice:
        raise ValueError(f"defined more than once in lua/lib: {twice}")
    return tuple(chunks)


def _needed(chunks: Sequence[tuple[str, str]], body: str) -> str:
    """The definitions ``body`` uses, directly or through each other, each after those it uses.

    Redis runs the whole text of a script on every call, so each helper it
    defines is a closure built per call: a script that carried the whole
    library paid for every helper it never used (measured: most of the
    fixed cost of a small script). A definition comes along when a wanted
    text's code names it: a name in a comment or a string brings nothing
    (the enqueue script carried 17 unused helpers for comments alone).

    A Lua local is visible only below its definition (above it, the name is
    a global, which a Redis script may not read), so each definition is
    placed after every one its code uses (comments and strings aside); all
    else in library order, so the library's files can be split by concern
    and named freely. Lua has no mutual recursion between locals without a
    forward declaration, so the uses form no cycle; should a misread name
    make one, the walk cuts it where it meets it, and
    ``tests/broker/test_scripts.py`` fails on the use left above its definition.
    """
    defined = {name for name, _ in chunks}
    texts = dict(chunks)
    wanted: set[str] = set()
    todo = set(code_names(body)) & defined
    while todo:
        name = todo.pop()
        wanted.add(name)
        todo |= (code_names(texts[name]) & defined) - wanted - {name}
    place = {name: i for i, (name, _) in enumerate(chunks)}
    ordered: list[str] = []
    visited: set[str] = set()

    def visit(name: str) -> None:
        visited.add(name)
        for used in sorted((code_names(texts[name]) & wanted) - visited, key=place.__getitem__):
            if used not in visited:  # an earlier one of this loop may have visited it
                visit(used)
        ordered.append(name)

    for name, _ in chunks:
        if name in wanted and name not in visited:
            visit(name)
    return "\n".join(texts[name] for name in ordered)


@cache
def script_source(name: str) -> str:
    """The full text of one script: the definitions it needs, then its own body.

    Definitions come from ``library``: the job record's declaration and the
    files of ``lua/lib/``.

    Cached because package files never change while a process runs; the
    result is an immutable str.
    """
    body = resources.files(__package__).joinpath("lua").joinpath(f"{name}.lua").read_text(encoding="utf-8")
    return f"{_needed(library(), body)}\n{body}"


class Scripts:
    """The scripts registered on one Redis client, and how a ``ScriptCall`` is sent.

    One instance per app connection. With ``replicated``, ``write`` follows a
    call with ``WAIT`` on the same connection (see ``slots.write_then_wait``).
    """

    def __init__(self, client: redis.Redis | RedisCluster, replicated: bool = False) -> None:
        self._client: Any = client  # a cluster client, or a plain one
        self._cluster = is_cluster(client)
        self.replicated = replicated
        self._scripts = {name: client.register_script(script_source(name)) for name in SCRIPT_NAMES}
        # A plain or Sentinel client: the hot calls skip redis-py's per-call machinery (``direct.py``).
        self._direct = None if self._cluster else Direct(client)  # type: ignore[arg-type]

    def run(self, call: ScriptCall[T]) -> T:
        """Run one call and decode its reply.

        In a cluster, the call goes straight to the master of the queue's slot.
        """
        return call.decode(self._raw(call))

    def write(self, call: ScriptCall[T]) -> tuple[T, int | None]:
        """Run a call that records something: (its reply, replicas that have it, or None when not asked).

        With durability="replicated", the script and ``WAIT`` go together to
        the master of the queue's slot, on one connection (see slots.py).
        """
        if not self.replicated:
            return self.run(call), None
        script = self._scripts[call.name]
        pending = call.keys[0]

        def write(node: redis.Redis) -> tuple[Any, int]:
            return write_then_wait(node, script, call.keys, call.argv, REPLICA_WAIT_MS)

        with denials(call.name):
            raw, acked = on_master(self._client, pending, write) if self._cluster else write(self._client)
        return call.decode(raw), acked

    def run_each(self, calls: Sequence[ScriptCall[T]]) -> list[T]:
        """Calls of one script over several queues in one pipeline per master, replies in call order."""
        if not calls:
            return []
        script = self._scripts[calls[0].name]
        with denials(calls[0].name):
            raws = script_per_node(self._client, script, [(c.keys, c.argv) for c in calls])
        return [c.decode(raw) for c, raw in zip(calls, raws, strict=True)]

    def command(self, call: ScriptCall[Any]) -> tuple[Any, ...]:
        """The raw EVALSHA command of ``call``, to queue behind another command in a plain pipeline.

        (redis-py's ``Script`` in a pipeline first asks SCRIPT EXISTS: a
        round trip more.) On NOSCRIPT, send the call again with ``run``.
        """
        return ("EVALSHA", self._scripts[call.name].sha, 1, *call.keys, *call.argv)

    def _raw(self, call: ScriptCall[Any]) -> Any:
        script = self._scripts[call.name]
        keys, argv = call.keys, call.argv
        with OnError(denials, call.name):
            if self._direct is None:  # a cluster
                return on_master(self._client, keys[0], lambda node: run_script(node, script, keys, argv))
            return self._direct(script, keys, argv)

    def script(self, name: str) -> Any:
        """The redis-py ``Script`` object of ``name`` (its ``sha`` and source)."""
        return self._scripts[name]


@contextmanager
def denials(name: str) -> Iterator[None]:
    """An ACL denial inside script ``name`` as a ``NoPermissionError`` naming the command denied."""
    try:
        yield
    except redis.ResponseError as exc:
        denied = denied_in_script(name, str(exc))
        if denied is None:
            raise
        raise redis.exceptions.NoPermissionError(denied) from None


def denied_in_script(name: str, message: str) -> str | None:
    """For an ACL denial inside script ``name``: which command was denied (each server words it differently)."""
    return describe_script_denial(name, message, script_source(name))
