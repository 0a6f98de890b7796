"""The producer's job operations, planned once: ``Jobs`` drives them on redis-py, ``AsyncJobs`` on redis.asyncio.

Each function returns a plan (``plan.py``): what to send, and how to read
what comes back. The enqueue plan is ``AsyncJobs.enqueue`` and the sync
side's sliced enqueue; a sync enqueue of one call (``.delay()``) keeps its
hand-written path in ``Jobs.enqueue``, the hot path, which sends the same
tries in the same order without a generator in between.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any, NoReturn, TypeVar

import redis

from ..errors import QueueFull
from . import batches, calls, junk, keys
from .calls import ScriptCall
from .durability import confirmed_enqueue
from .keys import QueueKeys
from .plan import Command, Pipeline, Plan, Script, Scripts, Settings, WaitList, one, through_failover
from .record import NewJob
from .replies import AbortOutcome, CancelOutcome, EnqueueRefused
from .stream_reads import STREAM_BATCH, StreamRead, block_ms, damaged, entries, state_text

T = TypeVar("T")


def queue_full(queue: str, size: int, max_size: int, count: int) -> QueueFull:
    """The error of an enqueue refused for ``max_size`` (sync and async alike)."""
    return QueueFull(
        f"queue {queue!r} holds {size} unfinished jobs and max_size is {max_size}; "
        f"the {'job was' if count == 1 else f'{count} jobs were'} not stored. "
        "Wait for workers to catch up or raise max_size."
    )


def _none(exc: redis.ResponseError) -> None:
    return None  # not a hash: written by something else


def read(queue: str, job_id: str) -> Plan[dict[bytes, bytes] | None]:
    """The raw job hash, or None when there is no such job (or the key holds something else)."""
    key = QueueKeys(queue).job(job_id)
    fields = yield Command(lambda client: client.hgetall(key), guard=None, on_error=_none)
    return fields or None


def holding(queues: Sequence[str], job_id: str) -> Plan[str | None]:
    """The first of ``queues`` that holds a record of ``job_id``, asked of all in one round trip; None for none.

    A key of another type (written by something else) holds no job, as ``read`` answers.
    """
    if not queues:
        return None

    def fill(pipe: Any) -> None:
        for queue in queues:
            pipe.type(QueueKeys(queue).job(job_id))

    types = yield Pipeline(fill, guard=None)
    return next((queue for queue, kind in zip(queues, types, strict=True) if kind in (b"hash", "hash")), None)


def queues() -> Plan[list[str]]:
    """Every queue name ever enqueued to through any app on this Redis (junk set aside)."""
    raw = yield Command(lambda client: client.smembers(keys.QUEUES), on_error=junk.or_default(keys.QUEUES, set()))
    return junk.queue_names(raw)


def cancel(queue: str, job_id: str, retention_ms: int) -> Plan[CancelOutcome]:
    """1 cancelled, 0 too late (running or finished), -1 no such job."""
    call = calls.cancel(QueueKeys(queue), job_id=job_id, retention_ms=retention_ms)
    return (yield Script(call, guard=(queue,)))  # type: ignore[no-any-return]


def abort(queue: str, job_id: str, retention_ms: int) -> Plan[AbortOutcome]:
    """1 cancelled now, 2 running (its worker will stop it), 0 finished, -1 no such job."""
    call = calls.abort(QueueKeys(queue), job_id=job_id, retention_ms=retention_ms)
    return (yield Script(call, guard=(queue,)))  # type: ignore[no-any-return]


def await_state(queue: str, job_id: str) -> Plan[str | None]:
    return (yield Script(calls.await_state(QueueKeys(queue), job_id=job_id), guard=(queue,)))  # type: ignore[no-any-return]


def wait_done(queue: str, job_id: str, timeout: float) -> Plan[bool]:
    """Wait until the job's done list exists; non-destructive, so many may wait."""
    return (yield WaitList(QueueKeys(queue).done(job_id), timeout, guard=(queue,)))  # type: ignore[no-any-return]


def read_stream(queue: str, job_id: str, after: str, block: float) -> Plan[StreamRead]:
    """The job's stream items after entry ``after``, waiting up to ``block`` s for one (0: not at all);
    when none came, the job's state then."""
    keys_ = QueueKeys(queue)
    stream = {keys_.stream(job_id): after}

    def broken(exc: redis.ResponseError) -> NoReturn:
        raise damaged(job_id, exc) from None

    reply: Any = yield Command(
        lambda client: client.xread(stream, count=STREAM_BATCH, block=block_ms(block)), (queue,), broken
    )
    items = entries(reply)
    if items:
        return StreamRead(items)
    state = yield Command(lambda client: client.hget(keys_.job(job_id), "state"), (queue,), broken)
    return StreamRead([], state_text(state))


# -- storing jobs -------------------------------------------------------------------------------


def enqueue(sender: Settings, queue: str, jobs: Sequence[NewJob], max_size: int, resend: bool) -> Plan[list[str]]:
    """Store ``jobs`` in ``queue``, all or none (``Jobs.enqueue``); raises QueueFull.

    The first try may be plain (no "is this id stored already?" check), and
    is then sent once only; every later one, after an error, is a re-send
    that checks. Three tries at least, as redis-py's own retry gave.
    """
    if any(job.limits or job.key_limits for job in jobs):
        sender.learned_limits(queue)
    parts = batches.split(jobs)
    if parts is not None:  # too big for one call within the time budget
        return (yield from enqueue_sliced(sender, batches.Batch(queue, parts, max_size)))
    q = QueueKeys(queue)
    checked = [sender.cluster or resend]

    def attempt() -> Plan[list[str] | EnqueueRefused]:
        call = calls.enqueue(q, max_size=max_size, resend=checked[-1], jobs=jobs)
        checked.append(True)
        return enqueue_once(sender, call)

    reply = yield from through_failover(attempt, sender.failover_retry_s, tries=3)
    if isinstance(reply, EnqueueRefused):
        raise queue_full(queue, reply.size, max_size, len(jobs))
    return reply


def enqueue_once(sender: Settings, call: ScriptCall[T]) -> Plan[T]:
    """One try of an enqueue script, sent once: the queue listed first when due, then the call and,
    under durability="replicated", its ``WAIT`` (an unconfirmed write raises, to be retried)."""
    queue = call.queue.name
    if sender.known.due(queue):
        yield Command(lambda client: client.sadd(keys.QUEUES, queue), guard=(queue,), once=True)
        sender.known.added(queue)
    reply, acked = yield Script(call, guard=(queue,), wait=True, once=True)
    return confirmed_enqueue(reply, acked, sender.url)  # type: ignore[no-any-return]


def enqueue_sliced(sender: Settings, batch: batches.Batch) -> Plan[list[str]]:
    """``enqueue`` of a big batch: staged slice by slice, then committed slice by slice (``batches.py``)."""
    queue = batch.q.name
    for group in batch.staging():
        yield from through_failover(partial(one, Scripts(group, guard=(queue,))), sender.failover_retry_s, tries=3)
    commit = batch.commit()
    while True:
        reply = yield from through_failover(partial(enqueue_once, sender, commit), sender.failover_retry_s, tries=3)
        if reply.kind in ("FULL", "GONE"):
            while (yield Script(batch.drop(), guard=(queue,))).kind == "DROPPING":
                pass  # refused or broken before its commit: dropped now rather than left to expire
            if reply.kind == "GONE":
                raise batch.expired()
            raise queue_full(queue, reply.size, batch.max_size, batch.total)
        if batch.take(reply):
            break
        if reply.kind == "SLICE" and not sender.replicated:
            yield from _commit_rest(sender, batch)  # committed: the other steps go several per round trip
            break
    key, fields = batch.missing()
    found = (yield Command(lambda client: client.hmget(key, fields), guard=(queue,))) if fields else []
    yield Command(lambda client: client.unlink(key), guard=(queue,))
    return batch.ids(found)


def _commit_rest(sender: Settings, batch: batches.Batch) -> Plan[None]:
    """The commit steps after the first, ``STAGE_GROUP`` per round trip (each still its own call)."""
    steps = Scripts([batch.commit()] * batches.STAGE_GROUP, guard=(batch.q.name,))
    while True:
        replies = yield from through_failover(partial(one, steps), sender.failover_retry_s, tries=3)
        if any([batch.take(reply) for reply in replies]):
            return
