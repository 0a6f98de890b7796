"""What every peer's tasks do, and where: the side effects the harness measures.

The queue lives in one database (``BENCH_QUEUE_URL``, default db 8); the
counters live in another (``BENCH_COUNTER_URL``, db 9), so the commands of
the measurement itself never count as the library's.

``record_done`` costs the task one round trip (an INCR) in the common case:
the first completion also stores its timestamp, and so does the completion
that brings the count to ``BENCH_TARGET``, which gives W2 its first-to-last
time without any SET per job.
"""

from __future__ import annotations

import os
import time
from typing import Any

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


_sync = _PerProcess()
_async = _PerProcess()


def record_done() -> None:
    now = time.time()
    side = _sync.sync()
    count = side.incr(DONE)
    if count == 1:
        side.set(FIRST, repr(now))
    if count == target():
        side.set(LAST, repr(now))


def record_start() -> None:
    _sync.sync().rpush(STARTED, repr(time.time()))


async def arecord_done() -> None:
    now = time.time()
    side = _async.asyncio()
    count = await side.incr(DONE)
    if count == 1:
        await side.set(FIRST, repr(now))
    if count == target():
        await side.set(LAST, repr(now))


async def arecord_start() -> None:
    await _async.asyncio().rpush(STARTED, repr(time.time()))
