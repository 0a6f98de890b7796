"""The producer's job operations, planned once: ``Jobs`` drives them on redis-py, ``AsyncJobs`` on redis.asyncio.

Each function returns a plan (``plan.py``): what to send, and how to read
what comes back. Enqueueing is not here: its packed command on its own
connection is the hot path, and stays hand-written in ``Jobs.enqueue``.
"""

from __future__ import annotations

from typing import Any, NoReturn

import redis

from . import calls, junk, keys
from .keys import QueueKeys
from .plan import Command, Plan, Script, WaitList
from .replies import AbortOutcome, CancelOutcome
from .stream_reads import STREAM_BATCH, StreamRead, block_ms, damaged, entries, state_text


def _none(exc: redis.ResponseError) -> None:
    return None  # not a hash: written by something else


def read(queue: str, job_id: str) -> Plan[dict[bytes, bytes] | None]:
    """The raw job hash, or None when there is no such job (or the key holds something else)."""
    key = QueueKeys(queue).job(job_id)
    fields = yield Command(lambda client: client.hgetall(key), guard=None, on_error=_none)
    return fields or None


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
