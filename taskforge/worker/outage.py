"""A broker outage, as one process of a worker says it: once when it starts, rarely while it lasts, once when it ends.

Every Redis call of a worker meets an outage on its own (the supervisor's
lease renewal, reclaim and heartbeat, each lane's claim and idle wait, the
recording of a finished job), and each used to log every failure: a 12 s
outage wrote 32 lines of 280 characters and nothing when Redis came back.
Each process now keeps one ``Outage`` that all its callers report to, so
the log reads: one WARNING naming the (redacted) URL and the error class,
reminders spaced 2, 4, 8, ... s apart (at most every ``REMIND_CAP``), and
one INFO line ``reconnected to ... after N s``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import redis

from ..broker.connection import redact
from ..errors import BrokerUnavailable

log = logging.getLogger("taskforge.worker")

REMIND_FIRST = 2.0
REMIND_CAP = 300.0

# What an outage looks like from a worker: the broker's own wrapper, and the
# raw redis-py errors of the few calls that use the client directly (the
# worker listing's heartbeat).
OUTAGE_ERRORS: tuple[type[BaseException], ...] = (
    BrokerUnavailable,
    redis.ConnectionError,
    redis.TimeoutError,
    redis.exceptions.RedisClusterException,
)


def cause(exc: BaseException) -> str:
    """A short name for what went wrong: the redis-py class under ``BrokerUnavailable``, or a busy reply's code.

    ``BrokerUnavailable`` is raised ``from None``, which hides the original
    error from tracebacks but keeps it as ``__context__``.
    """
    inner: BaseException = exc
    while isinstance(inner, BrokerUnavailable) and inner.__context__ is not None:
        inner = inner.__context__
    if isinstance(inner, redis.ResponseError) and not isinstance(inner, redis.AuthenticationError):
        return str(inner).split(" ", 1)[0] or type(inner).__name__
    return type(inner).__name__


class Outage:
    """One process's view of the broker being away; safe to share between a child's lanes."""

    def __init__(self, url: str, clock: Callable[[], float] = time.monotonic) -> None:
        self.url = url  # redacted when said: app.drain() makes one per job, most never say anything
        self.clock = clock
        self.lock = threading.Lock()
        self.since: float | None = None  # when the current outage was first seen
        self.next_remind = 0.0
        self.remind_every = REMIND_FIRST

    @property
    def down(self) -> bool:
        return self.since is not None

    def failed(self, exc: BaseException) -> None:
        """A call met the outage: say so if it is new, or if a reminder is due."""
        now = self.clock()
        with self.lock:
            if self.since is None:
                self.since = now
                self.remind_every = REMIND_FIRST
                self.next_remind = now + self.remind_every
                log.warning("broker %s unreachable (%s); retrying", redact(self.url), cause(exc))
            elif now >= self.next_remind:
                self.remind_every = min(self.remind_every * 2, REMIND_CAP)
                self.next_remind = now + self.remind_every
                since = now - self.since
                log.warning("broker %s still unreachable after %.0f s (%s)", redact(self.url), since, cause(exc))

    def answered(self) -> None:
        """A call reached Redis: if an outage was under way, it is over, and that is said once."""
        if self.since is None:  # the common case, without the lock
            return
        with self.lock:
            if self.since is not None:
                log.info("reconnected to %s after %.1f s", redact(self.url), self.clock() - self.since)
                self.since = None
