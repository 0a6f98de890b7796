"""``depends_on``: a job that waits for jobs that already exist, planned once for sync and async.

A dependency may live in another queue, so in another hash slot (Redis
Cluster): no script can touch both jobs at once. So it goes as a
workflow's step reports to its workflow, in single-slot steps, each
idempotent:

1. the waiting job is stored scheduled far ahead, then held ``deferred``
   (``defer.lua``) with the list of its parents;
2. each parent lists it (``depend.lua``, in the parent's slot), or answers
   that it ended already: that end is reported at once;
3. a parent's final transition leaves its state in its queue's
   ``depbox`` (``lua/lib/finish.lua``, the same script as the transition);
   ``deliver`` reports it to every job listed (``dep_report.lua``, in the
   waiting job's slot: a parent counts once, so the job goes once) and only
   then drops it. A crash in between leaves it in the box for the next
   pass: the worker's reconciler and ``app.drain()`` each deliver the boxes.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from functools import partial
from typing import Any

from . import calls
from .keys import QueueKeys
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


def hold(queue: str, job_id: str, parents: Sequence[Parent], allow_failure: bool, retention_ms: int) -> Plan[str]:
    """Hold a job just stored until ``parents`` end; its state after the parents that ended were told."""
    q = QueueKeys(queue)
    yield Script(calls.defer(q, job_id=job_id, parents=parents_text(parents), allow_failure=allow_failure), (queue,))
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
    members = yield Command(lambda client: client.smembers(listed), guard=(queue,))
    for member in members:
        text = member.decode(errors="replace") if isinstance(member, bytes) else str(member)
        waiting_queue, _, waiting_id = text.partition("\t")
        yield from report(waiting_queue, waiting_id, parent, state, retention_ms)

    def drop(pipe: object) -> None:
        pipe.hdel(q.prefix + "depbox", parent)  # type: ignore[attr-defined]
        pipe.delete(listed)  # type: ignore[attr-defined]

    yield Pipeline(drop, guard=(queue,))
    return len(members)


def _box(key: str, client: Any) -> Any:
    return client.hgetall(key)


def deliver_boxes(queues: Sequence[str], retention_ms: int) -> Plan[int]:
    """Deliver every end left in the depboxes of ``queues``; how many waiting jobs were told."""
    told = 0
    for queue in queues:
        ends = yield Command(partial(_box, QueueKeys(queue).prefix + "depbox"), guard=(queue,))
        for parent, state in ends.items():
            name = parent.decode() if isinstance(parent, bytes) else str(parent)
            end = state.decode() if isinstance(state, bytes) else str(state)
            told += yield from deliver(queue, name, end, retention_ms)
    return told
