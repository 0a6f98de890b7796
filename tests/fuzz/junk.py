"""The junk catalogue: every key of the keyspace table, spoiled in every way, against every reader.

The keys come from the table in ``taskforge/broker/lua/README.md#keyspace``
(what ``docs/keyspace.md`` points to), parsed here, so a key added there is
spoiled here without anyone remembering to. Each pattern is made concrete
from one scene: an app whose queue holds a job in every state, keyed and
limited jobs, a debounced and a unique one, finished workflows and a running
one, a live worker's entry, a minute of stats and timings.

Kinds of damage, each applied to one key of the scene at a time:

* ``wrong-type``: the key holds another Redis type (a string, or a list where
  taskforge keeps a string);
* ``non-utf8``: a member, field or value that is not UTF-8;
* ``junk-json``: text that is not JSON where JSON is kept (every value of a
  hash, a member of a set);
* ``junk-number``: text that is not a number, or a number out of every range
  (``nan``, ``-1e400``, 25 nines), where numbers are kept; zset scores of
  ``inf`` and ``-inf``.

What a reader may do with junk is decided in test_junk.py.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis

import taskforge
from taskforge import TaskForge, chain
from taskforge.worker.registry import WorkerRegistry

QUEUE = "junk"
TABLE = Path(taskforge.__file__).parent / "broker" / "lua" / "README.md"
ROW = re.compile(r"^\| `(taskforge:[^`]+)` \| (\w+) \|", re.M)
DAMAGE = ("wrong-type", "non-utf8", "junk-json", "junk-number")
NON_UTF8 = b"\xff\xfe\x80junk"
NOT_JSON = b'{"not json'
NOT_NUMBERS = (b"abc", b"nan", b"-1e400", b"9" * 25, b"")


def keyspace() -> list[tuple[str, str]]:
    """(pattern, type) of every row of the keyspace table."""
    rows = ROW.findall(TABLE.read_text())
    assert len(rows) > 40, f"the keyspace table in {TABLE} was not found where expected"
    return rows


@dataclass
class Scene:
    """The healthy data every kind of damage is applied to, and the ids the readers look at."""

    app: TaskForge
    succeeded: str
    dead: str
    pending: str
    scheduled: str
    running: str
    keyed: str
    workflow: str
    workflow_running: str
    worker: str
    _web: Any = None

    @property
    def web(self) -> Any:
        """The dashboard of this scene's app, made once (its templates take a while to load)."""
        if self._web is None:
            from taskforge.dashboard.server import create_app

            self._web = create_app(self.app)
        return self._web

    @property
    def jobs(self) -> list[str]:
        return [self.succeeded, self.dead, self.pending, self.scheduled, self.running, self.keyed]

    def concrete(self, pattern: str) -> str:
        """The key of ``pattern`` in this scene (a placeholder filled with a name the scene uses)."""
        fill = {
            "{q}": "{" + QUEUE + "}",
            "{wf:<w>}": "{wf:" + self.workflow + "}",
            "worker:<id>": "worker:" + self.worker,
            "<id>": self.succeeded,
            "<t>": "limited",
            "<h>": "a1b2",
            "<l>": "1:0:k1",
            "<min>": str(self.minute()),
            "<k>": "k1",
            "<ms>": "0",
            "<j>": "0",
            "<state>": "succeeded",
            "<b>": "b1",  # a big enqueue's batch (broker/batches.py)
            "<i>": "0",  # its slice
        }
        for hole, value in fill.items():
            pattern = pattern.replace(hole, value)
        assert "<" not in pattern and "{q}" not in pattern, f"a placeholder of {pattern!r} has no value here"
        return pattern

    def minute(self) -> int:
        return int(self.app.broker.client.time()[0]) // 60


def build(url: str) -> Scene:
    """A scene on ``url``: every state a reader shows, written through the public API and the worker's code."""
    from taskforge.inprocess import drain

    app = TaskForge("junkapp", broker=url)

    @app.task(name="ok", queue=QUEUE)
    def ok(x: object = None) -> object:
        return x

    @app.task(name="boom", queue=QUEUE, max_attempts=1)
    def boom() -> None:
        raise ValueError("boom")

    @app.task(name="limited", queue=QUEUE, concurrency=1, rate_limit="100/m")
    def limited() -> None: ...

    @app.task(name="keyed", queue=QUEUE, key="account", key_concurrency=1)
    def keyed(account: str) -> None: ...

    @app.task(name="debounced", queue=QUEUE, debounce=60, key="k")
    def debounced(k: str) -> None: ...

    @app.task(name="unique", queue=QUEUE, unique_for=60)
    def unique() -> None: ...

    succeeded = ok.delay({"answer": 42})
    dead = boom.delay()
    workflow = chain(ok.s(1), ok.s()).delay()
    limited.delay()
    drain(app)
    succeeded.result(timeout=1)  # a waiter's done list
    running = ok.delay("running")
    app.broker.claims.dequeue(QUEUE, 3_600_000)
    pending = ok.delay("pending")
    scheduled = ok.apply_in(3600)
    keyed_first = keyed.delay("k1")
    keyed.delay("k1")
    limited.delay()
    debounced.delay("k1")
    unique.delay()
    workflow_running = chain(ok.s(2), ok.s()).delay()
    registry = WorkerRegistry(app.broker.client, [QUEUE], 2, 60.0, tasks=["ok"])
    registry.beat([], 3)
    return Scene(
        app,
        succeeded.id,
        dead.id,
        pending.id,
        scheduled.id,
        running.id,
        keyed_first.id,
        workflow.id,
        workflow_running.id,
        registry.id,
    )


Spoil = Callable[[redis.Redis, str, str], None]


def _text(client: redis.Redis, key: str, kind: str, value: bytes) -> None:
    """Put ``value`` where the key keeps its members or values, keeping the key's type."""
    if kind == "hash":
        fields = list(client.hkeys(key)) or [b"field"]
        client.hset(key, mapping=dict.fromkeys(fields, value))
        client.hset(key, value, value)
    elif kind == "zset":
        # Also led by the first member's first byte: a reader that parses members by their
        # first byte (the search index: a, t, k, d, c) must meet the junk too.
        first = client.zrange(key, 0, 0)
        client.zadd(key, {value: 0, (first[0][:1] if first else b"a") + value: 0})
    elif kind == "set":
        client.sadd(key, value)
    elif kind == "list":
        client.rpush(key, value)
    elif kind == "stream":
        client.xadd(key, {b"v": value, value: value})
    else:
        client.set(key, value)


def _numbers(client: redis.Redis, key: str, kind: str) -> None:
    if kind == "zset":
        members = list(client.zrange(key, 0, -1)) or [b"member"]
        client.zadd(key, {m: (float("inf"), float("-inf"), 1e300)[n % 3] for n, m in enumerate(members)})
        client.zadd(key, {b"abc": float("inf")})
    elif kind == "hash":
        fields = list(client.hkeys(key)) or [b"field"]
        client.hset(key, mapping={f: NOT_NUMBERS[n % len(NOT_NUMBERS)] for n, f in enumerate(fields)})
    else:
        _text(client, key, kind, NOT_NUMBERS[0])


def spoil(client: redis.Redis, key: str, kind: str, damage: str) -> None:
    """Apply ``damage`` to ``key``, which taskforge keeps as a ``kind``."""
    if damage == "wrong-type":
        client.delete(key)
        if kind == "string":
            client.rpush(key, b"not", b"a", b"string")
        else:
            client.set(key, b"not a " + kind.encode())
    elif damage == "non-utf8":
        _text(client, key, kind, NON_UTF8)
    elif damage == "junk-json":
        _text(client, key, kind, NOT_JSON)
    else:
        _numbers(client, key, kind)


class Snapshot:
    """Every key of a database, dumped once, restored before each case (much cheaper than a new scene)."""

    def __init__(self, client: redis.Redis) -> None:
        self.client = client
        self.rows = [(key, client.pttl(key), client.dump(key)) for key in client.scan_iter(count=1000)]

    def restore(self) -> None:
        self.client.flushdb()
        pipe = self.client.pipeline(transaction=False)
        for key, ttl, data in self.rows:
            pipe.restore(key, max(0, ttl), data, replace=True)
        pipe.execute()


def cases() -> Iterator[tuple[str, str, str]]:
    """(pattern, type, damage) for every row of the table and every kind of damage."""
    for pattern, kind in keyspace():
        for damage in DAMAGE:
            yield pattern, kind, damage
