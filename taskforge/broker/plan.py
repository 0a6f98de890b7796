"""A producer's operation written once, as a plan: a generator that yields requests and receives replies.

redis-py and redis.asyncio take the same commands under the same names and
differ only in whether a reply must be awaited. So an operation (cancel a
job, read its stream, pause a queue, write a workflow's ledger) is written
here once, as a generator of the requests below, and run by one of exactly
two drivers (``drivers.py``): ``drive`` on the sync client, ``adrive`` on
the async one. A plan never touches a client itself; it says what to send,
reads what came back, and decides what comes next, so the sync and the
async operation cannot drift apart.

What the drivers own: sending, awaiting, and turning Redis errors into
taskforge errors (each request names the queues whose fixed keys are
checked for damage when the server answers with an error: ``guard``). The
translated error is thrown into the plan at its ``yield``, so a plan retries
through a failover itself (``through_failover``), with a ``Sleep`` the
driver performs its own way.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import redis

from ..errors import BrokerUnavailable
from .calls import ScriptCall
from .durability import FailoverRetries, QueueNames

T = TypeVar("T")

# ``()``: ``Link.guard()`` (errors translated, the queue index checked for damage); a tuple of queue
# names: those queues' fixed keys checked too; ``None``: errors translated only (``broker_errors``).
Guard = tuple[str, ...] | None


@dataclass(frozen=True)
class Script(Generic[T]):
    """Run one Lua script call (``calls.py``); the reply is the call's decoded reply.

    ``wait``: a write that must reach a replica under durability="replicated"
    (``Scripts.write``): the reply is (decoded reply, replicas that
    confirmed it, or None when not replicated).
    """

    call: ScriptCall[T]
    guard: Guard = ()
    wait: bool = False
    once: bool = False  # sent at most once: a lost connection is raised, for the plan to re-send (``sent_once``)


@dataclass(frozen=True)
class Scripts:
    """Several calls of one script, each its own call, in as few round trips as the client allows
    (``Scripts.run_each`` on redis-py); the reply is their decoded replies in call order."""

    calls: Sequence[ScriptCall[Any]]
    guard: Guard = ()


@dataclass(frozen=True)
class Command:
    """One Redis command: ``send(client)``, written once since both clients name their commands alike.

    ``on_error``: what a server's error reply (``redis.ResponseError``, a key
    of the wrong type, say) reads as, decided inside the guard, before any
    translation: it returns the reply to give the plan, or raises (a
    ``ResponseError`` it raises again is translated as any other).
    """

    send: Callable[[Any], Any]
    guard: Guard = ()
    on_error: Callable[[redis.ResponseError], Any] | None = None
    once: bool = False  # as ``Script.once``


@dataclass(frozen=True)
class Pipeline:
    """Commands queued by ``fill(pipe)`` on one non-transactional pipeline: the reply is the list of replies
    (with ``raise_on_error=False``, a command's error reply is its place in the list)."""

    fill: Callable[[Any], object]
    guard: Guard = ()
    raise_on_error: bool = True


@dataclass(frozen=True)
class WaitList:
    """A blocking read: whether list ``key`` exists within ``timeout`` s, left as it was (``compat.wait_for_list``)."""

    key: str
    timeout: float
    guard: Guard = ()


@dataclass(frozen=True)
class Sleep:
    """Wait ``seconds``: ``time.sleep`` on the sync driver, ``asyncio.sleep`` on the async one."""

    seconds: float


def _nothing(queue: str) -> None:
    return None


@dataclass(frozen=True)
class Settings:
    """What plans need of the broker they run on, alike for its sync link and its async one."""

    url: str
    retention_ms: int
    cluster: bool  # a cluster client re-sends by itself: there every enqueue try checks for stored ids
    replicated: bool  # durability="replicated": writes that matter wait for a replica, one per round trip
    failover_retry_s: float
    known: QueueNames  # when each queue's name is due to be listed again in the queue index
    # An enqueue stored limited or keyed jobs in this queue: this client's claims look at its lanes from now on
    # (``hints.ClaimHints.knows_limits``; an async broker claims nothing).
    learned_limits: Callable[[str], None] = _nothing


Request = Script[Any] | Scripts | Command | Pipeline | WaitList | Sleep
Plan = Generator[Request, Any, T]


def one(request: Request) -> Plan[Any]:
    """The plan of a single request: its reply."""
    return (yield request)


def through_failover(attempt: Callable[[], Plan[T]], failover_retry_s: float, tries: int = 1) -> Plan[T]:
    """``attempt()``'s plan, run again while the broker is unavailable: for up to ``failover_retry_s``,
    and at least ``tries`` times in all (``durability.FailoverRetries`` counts and paces them)."""
    retries = FailoverRetries(failover_retry_s, tries)
    while True:
        try:
            return (yield from attempt())
        except BrokerUnavailable as exc:
            yield Sleep(retries.pause_after(exc))
