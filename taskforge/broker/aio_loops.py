"""One ``AsyncBroker`` per live event loop, closed when its loop ends.

A redis.asyncio connection belongs to the loop that opened it, so every loop
gets its own pool. A program that runs ``asyncio.run()`` per call
(``async_to_sync`` in a sync web worker, async tests) makes a new loop each
time, and a pool kept past its loop costs one Redis client and one file
descriptor per call, for good. So a pool lives only as long as its loop:

- At the loop's shutdown it is closed, awaited, while the loop still runs.
  ``asyncio.run``, ``asyncio.Runner``, asgiref's ``async_to_sync``,
  pytest-asyncio and anyio all call ``loop.shutdown_asyncgens()`` before
  closing a loop; a small guard generator, registered with the loop like
  any async generator, closes the pool when that call closes it.
- A loop closed without that (``loop.close()`` by hand) is found closed when
  the next new loop asks for a pool. Its sockets can no longer be awaited
  closed, so they are closed directly (``AsyncBroker.abandon``).

Entries are keyed by the loop's id and hold the loop itself only weakly.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
import weakref
from collections.abc import AsyncGenerator, Callable
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from .aio import AsyncBroker

log = logging.getLogger("taskforge.broker")


class _Entry(NamedTuple):
    loop: weakref.ref[asyncio.AbstractEventLoop]
    broker: AsyncBroker
    guard: AsyncGenerator[None, None] | None


class LoopBrokers:
    """The async brokers of one app, one per live event loop."""

    def __init__(self) -> None:
        self._entries: dict[int, _Entry] = {}
        self._lock = threading.Lock()  # loops in several threads may ask at once

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, make: Callable[[], AsyncBroker]) -> AsyncBroker:
        """The running loop's broker; made by ``make()`` on the loop's first ask (sending nothing)."""
        loop = asyncio.get_running_loop()
        entry = self._entries.get(id(loop))
        if entry is not None and entry.loop() is loop:
            return entry.broker
        with self._lock:
            self._sweep()
            broker = make()
            guard = _guarded(self, loop, broker)
            self._entries[id(loop)] = _Entry(weakref.ref(loop, self._gone(id(loop))), broker, guard)
        return broker

    async def aclose(self) -> None:
        """Close the running loop's broker now (``app.aclose()``); the next ask makes a new one."""
        loop = asyncio.get_running_loop()
        with self._lock:
            entry = self._entries.get(id(loop))
            if entry is None or entry.loop() is not loop:
                return
            del self._entries[id(loop)]
        if entry.guard is not None:
            await entry.guard.aclose()  # runs the guard's close; the loop's shutdown then finds it finished
        else:
            await entry.broker.close()

    def clear(self) -> None:
        """Forget every loop's broker (the sync broker changed); each loop's own guard still closes its old one."""
        with self._lock:
            dropped, self._entries = self._entries, {}
        for entry in dropped.values():
            loop = entry.loop()
            if loop is None or loop.is_closed():
                entry.broker.abandon()

    def forget(self, loop: asyncio.AbstractEventLoop, broker: AsyncBroker) -> None:
        """Drop ``loop``'s entry if it still holds ``broker`` (it is being closed)."""
        with self._lock:
            entry = self._entries.get(id(loop))
            if entry is not None and entry.broker is broker:
                del self._entries[id(loop)]

    def _sweep(self) -> None:
        """Close the pools of loops closed without a shutdown (under the lock, when a new loop arrives)."""
        for key, entry in list(self._entries.items()):
            loop = entry.loop()
            if loop is None or loop.is_closed():
                del self._entries[key]
                entry.broker.abandon()

    def _gone(self, key: int) -> Callable[[weakref.ref[asyncio.AbstractEventLoop]], None]:
        """A loop collected before its pool held it (it never connected): drop its entry."""
        own = weakref.ref(self)

        def gone(ref: weakref.ref[asyncio.AbstractEventLoop]) -> None:
            brokers = own()
            if brokers is not None:
                with brokers._lock:
                    entry = brokers._entries.get(key)
                    if entry is not None and entry.loop is ref:
                        del brokers._entries[key]

        return gone


def _guarded(
    brokers: LoopBrokers, loop: asyncio.AbstractEventLoop, broker: AsyncBroker
) -> AsyncGenerator[None, None] | None:
    """Start a guard that closes ``broker`` at ``loop``'s ``shutdown_asyncgens()``; None where it cannot be registered.

    An async generator's first step calls the thread's ``firstiter`` hook,
    which a running asyncio loop sets to its own method (it keeps the
    generator to close at shutdown). A loop that set none, or one already
    past its shutdown, gets no guard: the sweep closes its pool instead.
    """
    firstiter = sys.get_asyncgen_hooks().firstiter
    if getattr(firstiter, "__self__", None) is not loop or getattr(loop, "_asyncgens_shutdown_called", False):
        return None
    guard = _close_at_shutdown(brokers, weakref.ref(loop), broker)
    step = guard.__anext__()
    try:
        step.send(None)  # runs to the guard's yield at once: nothing in it awaits before
    except StopIteration:
        return guard
    raise AssertionError("the guard yields at its first step")


async def _close_at_shutdown(
    brokers: LoopBrokers, loop: weakref.ref[asyncio.AbstractEventLoop], broker: AsyncBroker
) -> AsyncGenerator[None, None]:
    try:
        yield
    finally:
        running = loop()
        if running is not None:
            brokers.forget(running, broker)
        try:
            await broker.close()
        except Exception as exc:  # the loop is ending: nothing is left to tell but the log
            log.debug("closing an async pool at its loop's end failed: %s", exc)
