"""How the writes that matter survive a failover: retried through it, and ``durability="replicated"``.

One per ``Link``, used by ``Jobs`` and ``Claims``. Redis replicates asynchronously: a master that dies
right after acknowledging a write can take it with it. With
``durability="replicated"`` the scripts that store a job or its outcome are
followed by ``WAIT`` on the same connection (``Scripts.write``),
and an enqueue no replica confirmed is an error, retried like an outage.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, TypeVar

from ..errors import BrokerUnavailable
from . import keys
from .calls import ScriptCall
from .connection import redact
from .replies import EnqueueRefused
from .scripts import REPLICA_WAIT_MS, Scripts

log = logging.getLogger("taskforge.broker")

# How long an enqueue to a cluster or Sentinel-managed Redis keeps retrying
# while a replica takes over from a failed master: above the failure
# detection time of usual settings (down-after-milliseconds and
# cluster-node-timeout of 5 to 15 s) plus the election.
FAILOVER_RETRY_S = 30.0


class FailoverRetries:
    """When a call the broker refused is tried again, and when it is given up: the arithmetic
    both the sync broker and the async one use; each sleeps its own way."""

    def __init__(self, failover_retry_s: float, tries: int) -> None:
        self.failover_retry_s = failover_retry_s
        self.tries = tries
        self.deadline = time.monotonic() + failover_retry_s
        self.pause = 0.05
        self.failed = 0

    def pause_after(self, exc: BrokerUnavailable) -> float:
        """Seconds to wait before the next try; raises once the tries and the time are spent."""
        self.failed += 1
        if self.failed >= self.tries and time.monotonic() + self.pause > self.deadline:
            if self.failover_retry_s:
                raise BrokerUnavailable(f"{exc} (retried for {self.failover_retry_s:.0f} s)") from None
            raise exc
        level = logging.WARNING if self.failover_retry_s else logging.DEBUG
        log.log(level, "%s; retrying in %.2f s (a failover may be under way)", exc, self.pause)
        pause, self.pause = self.pause, min(self.pause * 2, 1.0)
        return pause


T = TypeVar("T")


def unconfirmed_enqueue(url: str) -> BrokerUnavailable:
    """The error of an enqueue no replica confirmed (sync and async alike): retried like an outage."""
    return BrokerUnavailable(
        f"the enqueue was written to the master at {redact(url)} but no replica confirmed it "
        f"within {REPLICA_WAIT_MS} ms (durability='replicated'); it may be lost on failover"
    )


def confirmed_enqueue(reply: T, acked: int | None, url: str) -> T:
    """The enqueue script's reply once written, for the sync and the async enqueue alike.

    ``acked`` 0: under ``durability="replicated"`` no replica confirmed the
    write, which is an outage to retry (the retry finds the ids if they
    stayed). A refusal (``EnqueueRefused``, the queue is full) wrote nothing
    that a replica could confirm.
    """
    if not isinstance(reply, EnqueueRefused) and acked == 0:
        raise unconfirmed_enqueue(url)
    return reply


class Durability:
    """The enqueue's tries through a failover, and what an unconfirmed write means; one per ``Link``."""

    def __init__(
        self,
        client: Any,
        url: str,
        scripts: Scripts,
        guard: Callable[..., AbstractContextManager[None]],  # Link.guard: errors, and damage as CorruptQueue
        failover_retry_s: float,
    ) -> None:
        self.client = client
        self.url = url
        self.scripts = scripts
        self.guard = guard
        self.failover_retry_s = failover_retry_s
        self.known_queues = QueueNames()

    def enqueue_once(self, call: ScriptCall[list[str] | EnqueueRefused]) -> list[str] | EnqueueRefused:
        queue = call.queue.name
        with self.guard(queue):
            if self.known_queues.due(queue):
                self.client.sadd(keys.QUEUES, queue)
                self.known_queues.added(queue)
            reply, acked = self.scripts.write(call)
        return confirmed_enqueue(reply, acked, self.url)

    def through_failover(self, call: Callable[[], Any], tries: int = 1) -> Any:
        """``call()``, retried for up to ``failover_retry_s`` while the broker is unavailable,
        and at least ``tries`` times in all.

        Safe for enqueue: every try after the first checks whether the id is
        stored already, so a retry after a lost reply never makes a second job.
        """
        retries = FailoverRetries(self.failover_retry_s, tries)
        while True:
            try:
                return call()
            except BrokerUnavailable as exc:
                time.sleep(retries.pause_after(exc))

    def replicated_outcome(self, job_id: str | bytes, acked: int | None) -> None:
        # The outcome is recorded either way; retrying would be fenced. A lost
        # outcome on failover means the job runs again: at-least-once holds.
        if acked == 0:
            log.warning(
                "the outcome of %s was written to the master at %s but no replica confirmed it within %d ms "
                "(durability='replicated'); if the master fails now, the job runs again",
                job_id,
                redact(self.url),
                REPLICA_WAIT_MS,
            )


NAMES_AGAIN_EVERY = 60.0  # seconds a producer trusts that its queue's name is still in the registry


class QueueNames:
    """When a producer adds a queue's name to ``taskforge:queues`` again (``SADD``, once a minute per queue).

    Once per process was enough while names were never removed; ``taskforge
    queues forget`` (or a Redis restarted without its data) removes them, and a
    producer still sending there must list the queue again for ``status``.
    """

    def __init__(self) -> None:
        self.until: dict[str, float] = {}

    def due(self, queue: str) -> bool:
        return time.monotonic() >= self.until.get(queue, 0.0)

    def added(self, queue: str) -> None:
        self.until[queue] = time.monotonic() + NAMES_AGAIN_EVERY
