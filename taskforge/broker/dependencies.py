"""``depends_on``: a job that waits for jobs that already exist, planned once for sync and async.

A dependency may live in another queue, so in another hash slot (Redis
Cluster): no script can touch both jobs at once. So it goes as a
workflow's step reports to its workflow, in single-slot steps, each
idempotent:

1. the waiting job is stored scheduled far ahead with the list of its
   parents, then held ``deferred`` (``defer.lua``);
2. each parent lists it (``depend.lua``, in the parent's slot), or answers
   that it ended already: that end is reported at once;
3. a parent's final transition leaves its state in its queue's
   ``depbox`` (``lua/lib/finish.lua``, the same script as the transition);
   ``deliver`` reports it to every job listed (``dep_report.lua``, in the
   waiting job's slot: a parent counts once, so the job goes once) and only
   then drops it. A crash in between leaves it in the box for the next
   pass: the worker's reconciler and ``app.drain()`` each deliver the boxes.

A producer that dies between two of its steps, or a write a failover lost,
leaves a job parked or deferred with nobody to tell it: the reconciler's
``audit`` takes such jobs up again, the same idempotent steps.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from functools import partial
from typing import Any

from . import calls, job_plans, junk
from .keys import QueueKeys, deferred_key
from .plan import Command, Pipeline, Plan, Script

HELD_FOR_MS = 10 * 365 * 24 * 3600 * 1000  # how far ahead a waiting job is stored, the moment before it is held

Parent = tuple[str, str]  # (queue, job id)


def parked_due_ms() -> int:
    """When a waiting job is due as it is first stored: far ahead, so it cannot start before it is held."""
    return int(time.time() * 1000) + HELD_FOR_MS


def parents_text(parents: Sequence[Parent]) -> str:
    """The record's ``parents`` field: one ``queue<TAB>id`` a line."""
    return "\n".join(f"{queue}\t{job_id}" for queue, job_id in parents)


def parents_of(raw: bytes | str | None) -> list[Parent]:
    """``parents_text`` read back (what ``taskforge job`` and the dashboard show)."""
    text = raw.decode(errors="replace") if isinstance(raw, bytes) else (raw or "")
    return [(line.partition("\t")[0], line.partition("\t")[2]) for line in text.splitlines() if "\t" in line]


def fields(parents: Sequence[Parent], allow_failure: bool) -> dict[str, str]:
    """The record fields a waiting job is stored with: what it waits for, whatever happens next."""
    return {"parents": parents_text(parents), "allow_failure": "1" if allow_failure else ""}


def hold(queue: str, job_id: str, parents: Sequence[Parent], retention_ms: int) -> Plan[str]:
    """Hold a job just stored until ``parents`` end; its state after the parents that ended were told.

    Every step is idempotent, so the producer, and the reconciler after it (``audit``), may run
    it again, whole or in part: a parent lists the job once, counts once.
    """
    yield Script(calls.defer(QueueKeys(queue), job_id=job_id), (queue,))
    state = "deferred"
    for parent_queue, parent_id in dict.fromkeys(parents):
        call = calls.depend(QueueKeys(parent_queue), job_id=parent_id, dependent=f"{queue}\t{job_id}")
        answer = yield Script(call, guard=(parent_queue,))
        if answer != "waiting":  # ended already ('' : gone since it was found, as if cancelled)
            state = yield from report(queue, job_id, parent_id, answer or "cancelled", retention_ms)
    return state


def report(queue: str, job_id: str, parent: str, state: str, retention_ms: int) -> Plan[str]:
    """Tell the waiting job ``job_id`` that ``parent`` ended in ``state``; its state after (idempotent)."""
    call = calls.dep_report(QueueKeys(queue), job_id=job_id, parent=parent, state=state, retention_ms=retention_ms)
    return (yield Script(call, guard=(queue,)))  # type: ignore[no-any-return]


def deliver(queue: str, parent: str, state: str, retention_ms: int) -> Plan[int]:
    """Report ``parent``'s end to every job that waits for it, then drop it from the depbox; how many."""
    q = QueueKeys(queue)
    listed = q.prefix + "dependents:" + parent
    members = yield Command(partial(_members, listed), guard=(queue,), on_error=junk.or_default(listed, set()))
    for member in members:
        waiting_queue, _, waiting_id = _text(member).partition("\t")
        if waiting_queue and waiting_id and state in ENDS:  # else junk: dropped with the rest
            yield from report(waiting_queue, waiting_id, parent, state, retention_ms)

    def drop(pipe: object) -> None:
        pipe.hdel(q.prefix + "depbox", parent)  # type: ignore[attr-defined]
        pipe.delete(listed)  # type: ignore[attr-defined]

    yield Pipeline(drop, guard=(queue,))
    return len(members)


ENDS = ("succeeded", "dead", "cancelled")


def _text(raw: bytes | str) -> str:
    return raw.decode(errors="replace") if isinstance(raw, bytes) else str(raw)


def _box(key: str, client: Any) -> Any:
    return client.hgetall(key)


def _members(key: str, client: Any) -> Any:
    return client.smembers(key)


def deliver_boxes(queues: Sequence[str], retention_ms: int) -> Plan[int]:
    """Deliver every end left in the depboxes of ``queues``; how many waiting jobs were told."""
    told = 0
    for queue in queues:
        box = QueueKeys(queue).prefix + "depbox"
        ends = yield Command(partial(_box, box), guard=(queue,), on_error=junk.or_default(box, {}))
        for parent, state in ends.items():
            told += yield from deliver(queue, _text(parent), _text(state), retention_ms)
    return told


AUDIT_AFTER_MS = 60_000  # a job deferred this long is listed again by each parent, once a minute
AUDIT_SLICE = 50


def audit(queues: Sequence[str], retention_ms: int) -> Plan[int]:
    """Take up, in slices, what a producer that died mid-call or a write Redis lost left behind.

    A job stored but never held (still due far ahead, with its ``parents``) is held; a job deferred
    for a minute is listed again by each parent, and told of those that ended. Both are ``hold``
    again, idempotent, so running beside a live producer changes nothing. How many it looked at.
    """
    now = int(time.time() * 1000)
    looked = 0
    for queue in queues:
        q = QueueKeys(queue)
        deferred = deferred_key(q)
        parked = yield Command(
            partial(_range, q.scheduled, now + HELD_FOR_MS // 2, "+inf"), (queue,), junk.or_default(q.scheduled, [])
        )
        stale = yield Command(
            partial(_range, deferred, "-inf", now - AUDIT_AFTER_MS), (queue,), junk.or_default(deferred, [])
        )
        if stale:
            yield Command(partial(_touch, deferred, stale, now), guard=(queue,))
        for raw in [*parked, *stale]:
            job_id = _text(raw)
            record = yield from job_plans.read(queue, job_id)
            parents = parents_of((record or {}).get(b"parents"))
            if parents:  # else a job due far ahead of the user's own
                yield from hold(queue, job_id, parents, retention_ms)
                looked += 1
    return looked


def _range(key: str, low: int | str, high: int | str, client: Any) -> Any:
    return client.zrangebyscore(key, low, high, start=0, num=AUDIT_SLICE)


def _touch(key: str, ids: list[Any], now: int, client: Any) -> Any:
    return client.zadd(key, dict.fromkeys(ids, now), xx=True)  # looked at again a minute from now
