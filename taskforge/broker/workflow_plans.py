"""The workflow ledger's operations, planned once for the sync and the async ledger.

Each operation is a plan (``plan.py``) that ``WorkflowStore`` drives on
redis-py and ``AsyncWorkflowStore`` on redis.asyncio, and the commands of
its pipelines are queued by the functions at the top, against any
pipeline, with the clock passed in. The two ledgers then cannot drift apart
in what they write, or in which order (the launching mark before the
record; the index before ``workflow_settle``), so a workflow launched from
async code is repaired by the same reconciler.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, TypeVar

import redis

from ..errors import BrokerUnavailable
from . import calls, junk, workflow_pieces
from .calls import ScriptCall
from .connection import redact
from .keys import WORKFLOW_LAUNCHING, WORKFLOW_RESUMING, WORKFLOW_STATES, QueueKeys, WorkflowKeys, workflow_index
from .plan import Command, Pipeline, Plan, Script, WaitList
from .replies import ResumeReply, WorkflowReply
from .scripts import REPLICA_WAIT_MS

T = TypeVar("T")
# Open steps a workflow_flight call looks at: each costs a few commands, a chord's body one per input.
FLIGHT_SLICE = 500
# Steps a cancel_steps or replan_steps call handles: each costs its script a dozen commands or so.
STEP_SLICE = 100


def sliced(job_ids: Sequence[str]) -> list[Sequence[str]]:
    """``job_ids`` in slices of ``STEP_SLICE``, so that no call on a group's steps holds Redis long;
    one empty slice for none (replan_steps also acts on its on_failure step)."""
    return [job_ids[i : i + STEP_SLICE] for i in range(0, max(1, len(job_ids)), STEP_SLICE)]


def replica_missed(what: str, url: str, again: str) -> str:
    """The ``BrokerUnavailable`` message when no replica confirmed a workflow script's write in time."""
    return (
        f"{what} was written to the master at {redact(url)} but no replica confirmed it "
        f"within {REPLICA_WAIT_MS} ms (durability='replicated'); it will be {again} again"
    )


def mark_launching(pipe: Any, workflow: str, now_ms: int) -> None:
    """A new workflow is launching (and running): the marks go before its record is stored."""
    pipe.zadd(WORKFLOW_LAUNCHING, {workflow: now_ms})
    pipe.zadd(workflow_index("running"), {workflow: now_ms})


def list_ended(pipe: Any, ended: Sequence[tuple[str, str]], now_ms: int, retention_ms: int) -> None:
    """Ended workflows leave the running and launching indexes and are listed under their final
    states; each index touched drops what is older than the retention."""
    for workflow, state in ended:
        pipe.zrem(workflow_index("running"), workflow)
        pipe.zrem(WORKFLOW_LAUNCHING, workflow)
        if state in WORKFLOW_STATES:
            pipe.zadd(workflow_index(state), {workflow: now_ms}, nx=True)
    for state in sorted({state for _, state in ended if state in WORKFLOW_STATES and state != "running"}):
        pipe.zremrangebyscore(workflow_index(state), "-inf", now_ms - retention_ms)


def read_steps(pipe: Any, steps: Sequence[tuple[str, str]]) -> None:
    """Queue the reads of (queue, job id) steps' records."""
    for queue, job_id in steps:
        pipe.hgetall(QueueKeys(queue).job(job_id))


def step_records(replies: Sequence[Any]) -> list[dict[bytes, bytes]]:
    """The replies of ``read_steps``: each step's record, {} for one not stored (or not a hash)."""
    return [reply if isinstance(reply, dict) else {} for reply in replies]


# -- whole operations: plans (``plan.py``) that WorkflowStore and AsyncWorkflowStore drive alike ------


def now_ms() -> int:
    return int(time.time() * 1000)


def replicated(call: ScriptCall[T], url: str, what: str, again: str = "sent") -> Plan[T]:
    """Run a workflow script and, with durability="replicated", wait for a replica, or raise.

    A report whose count a failover loses must stay in its outbox for the
    reconciler to deliver again (delivering twice counts once); raising
    here keeps it there. A resume's mark stays likewise, and the
    reconciler does it again (``again="done"``). Without replication the
    write is a plain run (``Scripts.write``).
    """
    reply, acked = yield Script(call, guard=None, wait=True)
    if acked == 0:
        raise BrokerUnavailable(replica_missed(what, url, again))
    return reply  # type: ignore[no-any-return]


def create_workflow(workflow: str, steps: int, fields: Sequence[tuple[str, bytes | str]], url: str) -> Plan[None]:
    """Store a new workflow; marked as launching until ``workflow_launched`` says its first steps are sent.

    The mark comes first (another slot): a producer that dies between the
    two leaves a mark the reconciler finds, never a workflow nobody starts.
    """
    now = now_ms()
    yield Pipeline(lambda pipe: mark_launching(pipe, workflow, now), guard=None)
    w = WorkflowKeys(workflow)
    pieces = workflow_pieces.split(steps, fields)
    for piece in pieces or ():  # a big workflow: staged out of sight, then committed at once
        yield Script(workflow_pieces.stage(w, piece), guard=None)
    call: ScriptCall[Any] = (
        calls.workflow_create(w, steps=steps, fields=fields) if pieces is None else workflow_pieces.commit(w)
    )
    if (yield from replicated(call, url, "the workflow")) == -1:
        raise workflow_pieces.expired(workflow)


def unmark(index: str, workflow: str) -> Plan[None]:
    """``workflow`` leaves the launching or the resuming marks."""
    yield Command(lambda client: client.zrem(index, workflow), guard=None)


def mark_resuming(workflow: str) -> Plan[None]:
    """A resume begins (``workflows.resume``): marked until its steps are sent, in case this process dies."""
    now = now_ms()
    yield Command(lambda client: client.zadd(WORKFLOW_RESUMING, {workflow: now}), guard=None)


def resume_workflow(workflow: str, finish: bool, url: str) -> Plan[ResumeReply]:
    """``workflow_resume``: a dead workflow is running again (``finish``: answer for a running one too)."""
    call = calls.workflow_resume(WorkflowKeys(workflow), finish=finish)
    return (yield from replicated(call, url, "the resume of a workflow", "done"))


def list_running(workflow: str) -> Plan[None]:
    """A resumed workflow is listed as running again (and no longer as dead)."""
    now = now_ms()

    def fill(pipe: Any) -> None:
        pipe.zrem(workflow_index("dead"), workflow)
        pipe.zadd(workflow_index("running"), {workflow: now}, nx=True)

    yield Pipeline(fill, guard=None)


def cancel_workflow(workflow: str, retention_ms: int) -> Plan[WorkflowReply]:
    call = calls.workflow_cancel(WorkflowKeys(workflow), retention_ms=retention_ms)
    return (yield Script(call, guard=None))  # type: ignore[no-any-return]


def report_step(call: ScriptCall[WorkflowReply], url: str) -> Plan[WorkflowReply]:
    """One step's report to its workflow (counted once however often it is sent)."""
    return (yield from replicated(call, url, "a workflow report"))


def workflow_flight(workflow: str) -> Plan[WorkflowReply]:
    """Every step of ``workflow`` free to go and not reported, a slice per call (``FLIGHT_SLICE``)."""
    w, cursor, ready = WorkflowKeys(workflow), "0", []
    while True:
        reply, cursor = yield Script(calls.workflow_flight(w, cursor=cursor, count=FLIGHT_SLICE), guard=None)
        ready += reply.ready
        if cursor == "0":
            return reply._replace(ready=ready)  # type: ignore[no-any-return]


def settle_workflows(ended: Sequence[tuple[str, str]], retention_ms: int) -> Plan[None]:
    """Ended workflows' last steps are stopped: list each under its final state, then say so.

    In that order: once settled, a re-delivered report asks for nothing
    more, so an index left unwritten then would stay wrong. A succeeded
    workflow was settled by the report that ended it (nothing to stop), so
    only its listing is left; if that is lost, the audit lists it.
    """
    if not ended:
        return
    now = now_ms()
    yield Pipeline(lambda pipe: list_ended(pipe, ended, now, retention_ms), guard=None)
    for workflow, state in ended:
        if state != "succeeded":
            yield Script(calls.workflow_settle(WorkflowKeys(workflow)), guard=None)


def _none(exc: redis.ResponseError) -> None:
    return None  # not a hash: written by something else


def read_workflow(workflow: str) -> Plan[dict[bytes, bytes] | None]:
    """The raw workflow record, or None when there is none (never was, or expired)."""
    key = WorkflowKeys(workflow).record
    fields = yield Command(lambda client: client.hgetall(key), guard=None, on_error=_none)
    return fields or None


def workflow_fields(workflow: str, names: Sequence[str]) -> Plan[list[bytes | None]]:
    key = WorkflowKeys(workflow).record
    none: list[bytes | None] = [None] * len(names)
    return (yield Command(lambda client: client.hmget(key, list(names)), None, junk.or_default(key, none)))  # type: ignore[no-any-return]


def wait_workflow(workflow: str, timeout: float) -> Plan[bool]:
    """Wait until the workflow's done list exists (it ended); non-destructive, so many may wait."""
    return (yield WaitList(WorkflowKeys(workflow).done, timeout, guard=None))  # type: ignore[no-any-return]


def cancel_steps(queue: str, workflow: str, job_ids: Sequence[str], retention_ms: int) -> Plan[int]:
    """Steps of an ended workflow cancelled, ``STEP_SLICE`` per call (a step cancelled twice counts once)."""
    q, cancelled = QueueKeys(queue), 0
    for ids in sliced(job_ids):
        call = calls.cancel_steps(q, workflow=workflow, retention_ms=retention_ms, job_ids=ids)
        cancelled += yield Script(call, guard=(queue,))
    return cancelled


def replan_steps(queue: str, workflow: str, on_failure: str, phase: str, job_ids: Sequence[str]) -> Plan[list[str]]:
    """``replan_steps``: a resumed workflow's steps on ``queue`` may go again; the ids moved to pending."""
    q, moved = QueueKeys(queue), list[str]()
    for ids in sliced(job_ids):
        call = calls.replan_steps(q, workflow=workflow, on_failure=on_failure, phase=phase, job_ids=ids)
        moved += yield Script(call, guard=(queue,))
    return moved


def read_step_records(steps: Sequence[tuple[str, str]]) -> Plan[list[dict[bytes, bytes]]]:
    """The raw records of (queue, job id) pairs, in one pipeline ({} for a step not stored)."""
    if not steps:
        return []
    return step_records((yield Pipeline(lambda pipe: read_steps(pipe, steps), guard=None, raise_on_error=False)))


def drop_from_outbox(queue: str, job_ids: Sequence[str]) -> Plan[None]:
    """These steps' reports reached their workflows: drop them from the queue's outbox."""
    yield Command(lambda client: client.hdel(QueueKeys(queue).outbox, *job_ids), guard=(queue,))
