"""Reading the search index (``lua/lib/index.lua``): the broker's half of ``find_jobs``.

Each queue's ``index`` is one sorted set whose members all score 0, so Redis
keeps them in byte order: a prefix (``t<#task>:<task>`` every job, by task,
``k<#key>:<key>``, ``d`` dead, ``c`` cancelled) followed by the job's stamp
(13 digits of creation ms, then ``<#id>:<id>``). A page is one
``ZREVRANGEBYLEX`` per list below a stamp (every job: one per task, merged),
and the records it names are read in one pipeline: no call walks every job. A search for running or scheduled
jobs may read those states' own sets instead (``live``), when they are
small. ``taskforge/search.py`` decides what to ask; this module only asks.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

import redis

from . import direct, junk
from .direct import LOST
from .keys import QueueKeys, search_index
from .slots import is_cluster

if TYPE_CHECKING:
    from .link import Link

TOP = b"~"  # sorts after every stamp (they start with digits)


MOST_TASKS = 10_000  # the task lists one search of every job merges, at most (a bound on junk)


def prefix_of(kind: str, value: str = "") -> bytes:
    """The members' prefix: ``d``, ``c``, or ``t``/``k`` with a length-prefixed task or key."""
    if kind in ("t", "k"):
        raw = value.encode()
        return b"%s%d:%s" % (kind.encode(), len(raw), raw)
    return kind.encode()


def reply(connection: Any) -> Any:
    """One reply; an error reply (read whole, so the connection stays in step) is returned, not raised."""
    try:
        return connection.read_response()
    except redis.ResponseError as exc:
        return exc


class Index:
    """The search index of each queue (``Broker.index``). Methods take the queue name."""

    def __init__(self, link: Link) -> None:
        self.client = link.client
        self.guard = link.guard
        plain = not is_cluster(link.client) and direct.plain_encoding(link.client)
        self.pack = direct.hiredis_pack if plain else None

    def count(self, queue: str, prefix: bytes, since: bytes = b"") -> int:
        """How many entries start with ``prefix`` (at or after stamp ``since``): O(log n)."""
        with self.guard(queue):
            key = search_index(queue)
            return int(
                junk.read(lambda: self.client.zlexcount(key, b"[" + prefix + since, b"[" + prefix + TOP), key, 0)
            )

    def tasks(self, queue: str) -> list[bytes]:
        """The prefix of each task with entries: one ``ZRANGEBYLEX`` of one member per task, each past the last.

        Every job has one entry, by task: a search of every job merges these
        lists. A member that is no task entry is stepped over.
        """
        prefixes: list[bytes] = []
        low = b"[t"
        with self.guard(queue):
            key = search_index(queue)
            while len(prefixes) < MOST_TASKS:
                found = self.first(key, low)
                if not found:
                    return prefixes
                head, colon, _ = found[0][1:].partition(b":")
                if not colon or not head.isdigit():
                    low = b"(" + found[0]
                    continue
                prefix = found[0][: len(head) + 2 + int(head)]
                prefixes.append(prefix)
                low = b"(" + prefix + TOP
        return prefixes

    def first(self, key: str, low: bytes) -> list[bytes]:
        """The first task entry at or after ``low`` (a range bound), or none."""
        return cast("list[bytes]", junk.read(lambda: self.client.zrangebylex(key, low, b"(u", start=0, num=1), key, []))

    def entries(self, queue: str, prefix: bytes, below: bytes | None, since: bytes, count: int) -> list[bytes]:
        """Up to ``count`` entries with ``prefix``, newest first, below stamp ``below`` (None: from the top).

        Returned without the prefix: each is its stamp.
        """
        high = b"(" + prefix + below if below is not None else b"[" + prefix + TOP
        with self.guard(queue):
            key = search_index(queue)
            found = cast(
                "list[bytes]",
                junk.read(
                    lambda: self.client.zrevrangebylex(key, high, b"[" + prefix + since, start=0, num=count), key, []
                ),
            )
        cut = len(prefix)
        return [member[cut:] for member in found]

    def live(self, queue: str, which: str, most: int) -> list[str] | None:
        """Every id in the queue's ``running`` or ``scheduled`` set (scheduled and retrying), None above ``most``.

        A search for running or scheduled jobs reads these small sets rather
        than the whole index, where they can sit far below the newest entries.
        """
        key = QueueKeys(queue).running if which == "running" else QueueKeys(queue).scheduled
        with self.guard(queue):
            if int(junk.read(lambda: self.client.zcard(key), key, 0)) > most:
                return None
            return junk.texts(
                cast("list[bytes]", junk.read(lambda: self.client.zrange(key, 0, most - 1), key, [])), key
            )

    def fields(self, queue: str, job_ids: Sequence[str], names: Sequence[str]) -> list[list[bytes | None]]:
        """``names`` of each job's record, in one pipeline (all None: no such record).

        A search reads thousands of records a page: redis-py spends about
        20 µs of client CPU packing each command of a pipeline, so, on a
        plain client with hiredis, the commands are packed in C and sent in
        one write on a connection of the client's pool (``direct.py`` does
        the same for the hot scripts). A lost connection falls back to the
        pipeline, which retries as redis-py does.
        """
        if not job_ids:
            return []
        q = QueueKeys(queue)
        with self.guard(queue):
            rows: list[Any] | None = None
            if self.pack is not None:
                try:
                    rows = self.packed([("HMGET", q.job(job_id), *names) for job_id in job_ids])
                except LOST:
                    pass
            if rows is None:
                pipe = self.client.pipeline(transaction=False)
                for job_id in job_ids:
                    pipe.hmget(q.job(job_id), list(names))
                rows = pipe.execute(raise_on_error=False)
        # A record that is not a hash reads as no record: its key is named once in the log.
        missing: list[bytes | None] = [None] * len(names)
        return [junk.reply(row, q.job(job_id), missing) for job_id, row in zip(job_ids, rows, strict=True)]

    def packed(self, commands: list[tuple[str, ...]]) -> list[Any]:
        """Read-only commands in one write, their replies in order, on a connection of the pool."""
        pack = self.pack
        assert pack is not None
        pool = cast("redis.Redis", self.client).connection_pool  # never a cluster's: see __init__
        connection: Any = pool.get_connection()
        try:
            connection.send_packed_command([b"".join(pack(c) for c in commands)], check_health=False)
            return [reply(connection) for _ in commands]
        except BaseException:  # what is left of the replies must not reach the next user of the connection
            connection.disconnect()
            raise
        finally:
            pool.release(connection)
