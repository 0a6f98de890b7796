"""What every peer's tasks do, and where: the side effects the harness measures.

The queue lives in one database (``BENCH_QUEUE_URL``, default db 8); the
counters live in another (``BENCH_COUNTER_URL``, db 9), so the commands of
the measurement itself never count as the library's.

Why the side effect is a raw socket with ``CLIENT REPLY OFF`` (the default,
``BENCH_SIDE_EFFECT=raw``): a task that waits for an ``INCR`` reply pays one
loopback round trip per job, about as long as a fast library's own work per
job, and pays it through the peer's own redis-py, whose version and parser
(hiredis or not) differ from peer to peer. That capped the fastest workers
and made the measurement part of what was measured. Here every peer runs
the same few lines: one ``sendall`` of ``INCR`` + ``SET last:<pid>`` per
job (plus ``SET first:<pid>`` once per process), no reply to wait for.
``BENCH_SIDE_EFFECT=redis-py`` restores the old side effect, an ``INCR``
through the peer's redis-py with its reply awaited, for comparison.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from typing import Any
from urllib.parse import urlparse

import redis

DONE = "bench:done"
FIRST = "bench:first"
LAST = "bench:last"
STARTED = "bench:started"


def queue_url() -> str:
    return os.environ.get("BENCH_QUEUE_URL", "redis://127.0.0.1:6379/8")


def counter_url() -> str:
    return os.environ.get("BENCH_COUNTER_URL", "redis://127.0.0.1:6379/9")


def target() -> int:
    return int(os.environ.get("BENCH_TARGET", "0"))


RAW = os.environ.get("BENCH_SIDE_EFFECT", "raw") == "raw"


def _command(*args: str) -> bytes:
    out = [b"*%d\r\n" % len(args)]
    for arg in args:
        data = arg.encode()
        out.append(b"$%d\r\n%s\r\n" % (len(data), data))
    return b"".join(out)


class _Raw:
    """A per-process socket to the counter database whose commands get no reply (``CLIENT REPLY OFF``)."""

    def __init__(self) -> None:
        self.pid = -1
        self.sock: socket.socket | None = None
        self.first_sent = False
        self.last_key = ""
        self.lock = threading.Lock()  # lanes and threads of one process share the socket

    def send(self, payload: bytes) -> None:
        with self.lock:
            self.connect()
            assert self.sock is not None
            self.sock.sendall(payload)

    def connect(self) -> None:
        if self.pid != os.getpid():  # workers fork after import: one socket per process
            parsed = urlparse(counter_url())
            sock = socket.create_connection((parsed.hostname or "127.0.0.1", parsed.port or 6379), timeout=10)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.sendall(_command("SELECT", parsed.path.strip("/") or "0"))
            if sock.recv(64) != b"+OK\r\n":
                raise RuntimeError("SELECT of the counter database failed")
            sock.sendall(_command("CLIENT", "REPLY", "OFF"))
            self.sock, self.pid, self.first_sent = sock, os.getpid(), False
            self.last_key = f"{LAST}:{os.getpid()}"

    def done(self) -> None:
        """Count one completion; the stamps go first, so a reader that sees the count sees them too."""
        with self.lock:
            self.connect()
            assert self.sock is not None
            stamp = repr(time.time())
            payload = _command("SET", self.last_key, stamp)
            if not self.first_sent:
                payload += _command("SET", f"{FIRST}:{os.getpid()}", stamp, "NX")
                self.first_sent = True
            self.sock.sendall(payload + _command("INCR", DONE))


class _PerProcess:
    """A client per process (and per event loop for asyncio): workers fork after import."""

    def __init__(self) -> None:
        self.pid = -1
        self.client: Any = None
        self.loop: Any = None

    def sync(self) -> redis.Redis:
        if self.pid != os.getpid():
            self.client = redis.Redis.from_url(counter_url())
            self.pid = os.getpid()
        return self.client

    def asyncio(self) -> Any:
        import asyncio

        import redis.asyncio as aioredis

        loop = asyncio.get_running_loop()
        if self.pid != os.getpid() or self.loop is not loop:
            self.client = aioredis.Redis.from_url(counter_url())
            self.pid, self.loop = os.getpid(), loop
        return self.client


_raw = _Raw()
_sync = _PerProcess()
_async = _PerProcess()


def record_done() -> None:
    if RAW:
        _raw.done()
        return
    now = time.time()
    side = _sync.sync()
    count = side.incr(DONE)
    if count == 1:
        side.set(FIRST, repr(now))
    if count == target():
        side.set(LAST, repr(now))


def record_start() -> None:
    if RAW:
        _raw.send(_command("RPUSH", STARTED, repr(time.time())))
        return
    _sync.sync().rpush(STARTED, repr(time.time()))


async def arecord_done() -> None:
    if RAW:
        _raw.done()  # a small blocking send: the same cost as in the sync peers
        return
    now = time.time()
    side = _async.asyncio()
    count = await side.incr(DONE)
    if count == 1:
        await side.set(FIRST, repr(now))
    if count == target():
        await side.set(LAST, repr(now))


async def arecord_start() -> None:
    if RAW:
        _raw.send(_command("RPUSH", STARTED, repr(time.time())))
        return
    await _async.asyncio().rpush(STARTED, repr(time.time()))
