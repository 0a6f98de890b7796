"""A script call sent on a connection of redis-py's own pool, without its per-call machinery.

redis-py spends about 23 µs of client CPU on one ``EVALSHA`` through
``Script.__call__`` (argument handling, the retry wrapper, hooks, the reply
callbacks), against about 6 µs to pack the same command once, send it and
read the reply on one of its ``Connection`` objects. The hot scripts (every
``.delay()``, every claim) go this way on a plain or Sentinel client;
redis-py still connects, authenticates, speaks TLS and follows a failover.

A connection a thread keeps is connected again through its ``connect()``,
as the pool connects one it hands out, never by ``send_packed_command`` on
its own: on a Sentinel client ``connect()`` asks the sentinels where the
master is now, while ``send_packed_command`` connects to the address the
connection last had, after a failover the old master's (refused while it
is down, read-only once it is back as a replica).

What redis-py would have done on an error is kept: an error reply leaves
the connection as it is (``NOSCRIPT``: the script is loaded and the call
sent again through redis-py, ``connection.run_script``); a connection error
closes the connection and, unless the caller asked for one send only
(``connection.sent_once``), the call goes again through redis-py, counted as
a re-send (``resends()``), as redis-py's own retry would have sent it.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable
from typing import Any

import redis

from .connection import count_resend, run_script, sending_once

hiredis_pack: Callable[[tuple[Any, ...]], bytes] | None
try:  # packs a whole command in C, as redis-py's own packer does after encoding each argument in Python
    from hiredis import pack_command as hiredis_pack  # type: ignore[import-not-found, no-redef, unused-ignore]
except ImportError:  # the "fast" extra is not installed: redis-py packs
    hiredis_pack = None

UNCAPPED = 2**31  # redis-py's default max_connections: no cap
# What a lost connection raises; anything else (an error reply) leaves the connection usable.
LOST = (redis.ConnectionError, redis.TimeoutError, OSError)


def plain_encoding(client: redis.Redis | Any) -> bool:
    """hiredis encodes str as UTF-8 and numbers as redis-py does; another encoding goes through redis-py."""
    kwargs = client.connection_pool.connection_kwargs
    plain = kwargs.get("encoding", "utf-8") == "utf-8" and kwargs.get("encoding_errors", "strict") == "strict"
    return plain and hiredis_pack is not None


class Direct:
    """``EVALSHA`` of a registered redis-py ``Script`` on a connection of ``client``'s pool.

    A thread keeps the connection it took (and the pool counts it as in
    use): taking one from the pool and giving it back costs a system call per
    call, to check that no stale reply waits on it, which cannot happen here:
    every reply is read whole, or the connection is closed.
    """

    def __init__(self, client: redis.Redis) -> None:
        self.pool = client.connection_pool
        self.mine = threading.local()
        # Threads keep at most half the pool's cap (max_connections: taskforge's default is 100);
        # the others take one and give it back per call, as redis-py does, so that threads
        # holding one never exhaust the pool for other commands.
        self.room = max(1, getattr(self.pool, "max_connections", UNCAPPED) // 2)
        self.holders = 0
        self.lock = threading.Lock()
        self.pack = hiredis_pack if plain_encoding(client) else None

    def connection(self) -> Any:
        """This thread's own connection, or None when the threads keep as many as they may."""
        held = getattr(self.mine, "held", None)
        if held is not None and held.pid == os.getpid():
            return held.connection
        with self.lock:
            if self.holders >= self.room:
                return None
            self.holders += 1
        held = self.mine.held = Held(self.pool, self.gone)  # a fresh process (forked) never uses its parent's
        return held.connection

    def gone(self, connection: Any) -> None:
        """A thread that kept a connection ended: it goes back to the pool."""
        self.pool.release(connection)
        with self.lock:
            self.holders -= 1

    def __call__(self, script: Any, keys: list[str], argv: list[Any]) -> Any:
        connection = self.connection()
        if connection is not None:
            return self.send(connection, script, keys, argv)
        connection = self.pool.get_connection()
        try:
            return self.send(connection, script, keys, argv)
        finally:
            self.pool.release(connection)

    def send(self, connection: Any, script: Any, keys: list[str], argv: list[Any]) -> Any:
        try:
            if connection._sock is None:  # lost (or closed) since its last call: connected as the pool would
                connection.connect()
            command = ("EVALSHA", script.sha, len(keys), *keys, *argv)
            packed = connection.pack_command(*command) if self.pack is None else [self.pack(command)]
            connection.send_packed_command(packed, check_health=False)
            return connection.read_response()
        except redis.exceptions.NoScriptError:
            return run_script(script.registered_client, script, keys, argv)  # loads it and sends it again
        except redis.ResponseError:  # an error reply, read whole: the connection is fine
            raise
        except LOST:
            connection.disconnect()  # connected again on the next call (to the new master, after a failover)
            if sending_once():
                raise
            count_resend()
            return run_script(script.registered_client, script, keys, argv)
        except BaseException:  # interrupted half-way: what is left of the reply must not reach the next call
            connection.disconnect()
            raise


class Held:
    """A thread's connection, given back to the pool when the thread ends (its locals are dropped)."""

    __slots__ = ("pid", "connection", "__weakref__")

    def __init__(self, pool: Any, gone: Any) -> None:
        self.pid = os.getpid()
        self.connection = pool.get_connection()
        weakref.finalize(self, gone, self.connection)
