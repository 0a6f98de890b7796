"""The broker's side of workflows: their scripts, the queues' outboxes and the index of workflows.

A workflow's state lives in Redis under its own hash tag (``WorkflowKeys``),
so its scripts are single-slot wherever its steps' queues are. A step's final
transition leaves a report in its own queue's outbox (``finish`` in
``lua/lib/finish.lua``); ``taskforge.workflows.delivery`` carries it to the workflow and
sends what may go next. This module only speaks to Redis.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar, cast

import redis

from ..errors import BrokerUnavailable
from . import calls, junk, workflow_pieces
from . import workflow_plans as plans
from .calls import ScriptCall
from .compat import wait_for_list
from .connection import broker_errors, redact
from .keys import (
    WORKFLOW_LAUNCHING,
    WORKFLOW_RESUMING,
    WORKFLOW_STATES,
    QueueKeys,
    WorkflowKeys,
    workflow_index,
)
from .replies import ResumeReply, WorkflowReply
from .scripts import REPLICA_WAIT_MS
from .slots import script_after

if TYPE_CHECKING:
    from .link import Link

T = TypeVar("T")
# Open steps a workflow_flight call looks at: each costs a few commands, a chord's body one per input.
FLIGHT_SLICE = 500
# Steps a cancel_steps or replan_steps call handles: each costs its script a dozen commands or so.
STEP_SLICE = 100


def sliced(job_ids: Sequence[str]) -> list[Sequence[str]]:
    """``job_ids`` in slices of ``STEP_SLICE``, so that no call on a group's steps holds Redis long;
    one empty slice for none (replan_steps also acts on its on_failure step)."""
    return [job_ids[i : i + STEP_SLICE] for i in range(0, max(1, len(job_ids)), STEP_SLICE)]


class StepReport(NamedTuple):
    """A step's final outcome, on its way from its queue's outbox to its workflow."""

    queue: str
    job_id: str
    workflow: str
    step: int
    state: str  # succeeded, dead or cancelled
    result: bytes = b""
    error: str = ""


def _by_queue(reports: Sequence[StepReport]) -> dict[str, list[str]]:
    by_queue: dict[str, list[str]] = {}
    for report in reports:
        by_queue.setdefault(report.queue, []).append(report.job_id)
    return by_queue


def _now_ms() -> int:
    return int(time.time() * 1000)


class WorkflowStore:
    """The workflow ledger (``Broker.ledger``): workflows' records, their index, the steps' outboxes."""

    def __init__(self, link: Link) -> None:
        self.client: Any = link.client
        self.cluster = link.cluster
        self.scripts = link.scripts
        self.url = link.url
        self.retention_ms = link.retention_ms
        self.guard = link.guard

    # -- a workflow's own slot -------------------------------------------

    def create_workflow(self, workflow: str, steps: int, fields: Sequence[tuple[str, bytes | str]]) -> None:
        """Store a new workflow; marked as launching until ``workflow_launched`` says its first steps are sent.

        The mark comes first (another slot): a producer that dies between the
        two leaves a mark the reconciler finds, never a workflow nobody starts.
        """
        with broker_errors(self.url):
            pipe = self.client.pipeline(transaction=False)
            plans.mark_launching(pipe, workflow, _now_ms())
            pipe.execute()
            w = WorkflowKeys(workflow)
            pieces = workflow_pieces.split(steps, fields)
            for piece in pieces or ():  # a big workflow: staged out of sight, then committed at once
                self.scripts.run(workflow_pieces.stage(w, piece))
            call: ScriptCall[Any] = (
                calls.workflow_create(w, steps=steps, fields=fields) if pieces is None else workflow_pieces.commit(w)
            )
            done = self._replicated(call, "the workflow") if self.scripts.replicated else self.scripts.run(call)
            if done == -1:
                raise workflow_pieces.expired(workflow)

    def workflow_launched(self, workflow: str) -> None:
        """Its first steps are stored: no longer launching."""
        with broker_errors(self.url):
            self.client.zrem(WORKFLOW_LAUNCHING, workflow)

    def report_steps(
        self, reports: Sequence[StepReport], dropped: Sequence[StepReport] = (), listed: Sequence[str] = ()
    ) -> list[WorkflowReply]:
        """Deliver steps' reports to their workflows: one pipeline per master, replies in order.

        ``dropped``: reports delivered earlier, to drop from their outboxes, and
        ``listed``: workflows that succeeded earlier, to list as such; both in
        the same round trip on a single Redis (separately on a cluster).
        """
        batch = [
            calls.workflow_report(
                WorkflowKeys(r.workflow),
                step=r.step,
                state=r.state,
                result=r.result,
                error=r.error,
                retention_ms=self.retention_ms,
            )
            for r in reports
        ]
        if not self.cluster and not self.scripts.replicated and batch:

            def done_already(pipe: Any) -> None:  # first: their work is done
                for queue, ids in _by_queue(dropped).items():
                    pipe.hdel(QueueKeys(queue).outbox, *ids)
                self._list(pipe, [(workflow, "succeeded") for workflow in listed])

            script = self.scripts.script("workflow_report")
            with broker_errors(self.url):
                raws = script_after(self.client, script, [(c.keys, c.argv) for c in batch], done_already)
            return [call.decode(raw) for call, raw in zip(batch, raws, strict=True)]
        self.delivered(dropped)
        self.settle_workflows([(workflow, "succeeded") for workflow in listed])
        if not batch:
            return []
        with broker_errors(self.url):
            if not self.scripts.replicated:
                return self.scripts.run_each(batch)
            return [self._replicated(call, "a workflow report") for call in batch]

    def _replicated(self, call: ScriptCall[T], what: str, again: str = "sent") -> T:
        """Run a workflow script and wait for a replica (durability="replicated"), or raise.

        A report whose count a failover loses must stay in its outbox for the
        reconciler to deliver again (delivering twice counts once); raising
        here keeps it there. A resume's mark stays likewise, and the
        reconciler does it again (``again="done"``).
        """
        reply, acked = self.scripts.write(call)
        if acked == 0:
            raise BrokerUnavailable(replica_missed(what, self.url, again))
        return reply

    def mark_resuming(self, workflow: str) -> None:
        """A resume begins (``workflows.resume``): marked until its steps are sent, in case this process dies."""
        with broker_errors(self.url):
            self.client.zadd(WORKFLOW_RESUMING, {workflow: _now_ms()})

    def resume_workflow(self, workflow: str, finish: bool = False) -> ResumeReply:
        """``workflow_resume``: a dead workflow is running again (``finish``: answer for a running one too)."""
        call = calls.workflow_resume(WorkflowKeys(workflow), finish=finish)
        with broker_errors(self.url):
            if self.scripts.replicated:
                return self._replicated(call, "the resume of a workflow", "done")
            return self.scripts.run(call)

    def list_running(self, workflow: str) -> None:
        """A resumed workflow is listed as running again (and no longer as dead)."""
        with broker_errors(self.url):
            pipe = self.client.pipeline(transaction=False)
            pipe.zrem(workflow_index("dead"), workflow)
            pipe.zadd(workflow_index("running"), {workflow: _now_ms()}, nx=True)
            pipe.execute()

    def workflow_resumed(self, workflow: str) -> None:
        """Its steps are made ready and sent: no longer resuming."""
        with broker_errors(self.url):
            self.client.zrem(WORKFLOW_RESUMING, workflow)

    def resuming_since(self, before_ms: int, limit: int = 100) -> list[str]:
        """Workflows whose resume began before ``before_ms`` and was not confirmed: its process may have died."""
        with broker_errors(self.url):
            raw = junk.read(
                lambda: self.client.zrangebyscore(WORKFLOW_RESUMING, "-inf", before_ms, start=0, num=limit),
                WORKFLOW_RESUMING,
                [],
            )
        return junk.texts(raw, WORKFLOW_RESUMING)

    def cancel_workflow(self, workflow: str) -> WorkflowReply:
        call = calls.workflow_cancel(WorkflowKeys(workflow), retention_ms=self.retention_ms)
        with broker_errors(self.url):
            return self.scripts.run(call)

    def workflow_flight(self, workflow: str) -> WorkflowReply:
        """Every step of ``workflow`` free to go and not reported, a slice per call (``FLIGHT_SLICE``)."""
        w, cursor, ready = WorkflowKeys(workflow), "0", []
        with broker_errors(self.url):
            while True:
                reply, cursor = self.scripts.run(calls.workflow_flight(w, cursor=cursor, count=FLIGHT_SLICE))
                ready += reply.ready
                if cursor == "0":
                    return reply._replace(ready=ready)

    def settle_workflow(self, workflow: str, state: str) -> None:
        self.settle_workflows([(workflow, state)])

    def settle_workflows(self, ended: Sequence[tuple[str, str]]) -> None:
        """Ended workflows' last steps are stopped: list each under its final state, then say so.

        In that order: once settled, a re-delivered report asks for nothing
        more, so an index left unwritten then would stay wrong. A succeeded
        workflow was settled by the report that ended it (nothing to stop), so
        only its listing is left; if that is lost, the audit lists it. One
        pipeline for all the listings, one for the rest.
        """
        if not ended:
            return
        with broker_errors(self.url):
            pipe = self.client.pipeline(transaction=False)
            self._list(pipe, ended)
            pipe.execute()
            rest = [calls.workflow_settle(WorkflowKeys(w)) for w, state in ended if state != "succeeded"]
            if rest:
                self.scripts.run_each(rest)

    def _list(self, pipe: Any, ended: Sequence[tuple[str, str]]) -> None:
        """Queue on ``pipe`` the index writes that list ended workflows under their final states."""
        plans.list_ended(pipe, ended, _now_ms(), self.retention_ms)

    def read_workflow(self, workflow: str) -> dict[bytes, bytes] | None:
        """The raw workflow record, or None when there is none (never was, or expired)."""
        with broker_errors(self.url):
            try:
                fields = cast("dict[bytes, bytes]", self.client.hgetall(WorkflowKeys(workflow).record))
            except redis.ResponseError:  # not a hash: written by something else
                return None
        return fields or None

    def workflow_fields(self, workflow: str, names: Sequence[str]) -> list[bytes | None]:
        with broker_errors(self.url):
            key = WorkflowKeys(workflow).record
            return cast(
                "list[bytes | None]", junk.read(lambda: self.client.hmget(key, list(names)), key, [None] * len(names))
            )

    def wait_workflow(self, workflow: str, timeout: float) -> bool:
        """Block until the workflow's done list exists (it ended); non-destructive, so many may wait."""
        with broker_errors(self.url):
            return wait_for_list(self.client, WorkflowKeys(workflow).done, timeout)

    # -- the steps' queues -----------------------------------------------

    def cancel_steps(self, queue: str, workflow: str, job_ids: Sequence[str]) -> int:
        """Steps of an ended workflow cancelled, ``STEP_SLICE`` per call (a step cancelled twice counts once)."""
        q, cancelled = QueueKeys(queue), 0
        with self.guard(queue):
            for ids in sliced(job_ids):
                call = calls.cancel_steps(q, workflow=workflow, retention_ms=self.retention_ms, job_ids=ids)
                cancelled += self.scripts.run(call)
        return cancelled

    def replan_steps(self, queue: str, workflow: str, on_failure: str, phase: str, job_ids: Sequence[str]) -> list[str]:
        """``replan_steps``: a resumed workflow's steps on ``queue`` may go again; the ids moved to pending."""
        q, moved = QueueKeys(queue), list[str]()
        with self.guard(queue):
            for ids in sliced(job_ids):
                call = calls.replan_steps(q, workflow=workflow, on_failure=on_failure, phase=phase, job_ids=ids)
                got: list[str] = self.scripts.run(call)
                moved += got
        return moved

    def outbox(self, queue: str) -> dict[str, str]:
        """Reports of steps that ended on ``queue`` and are not delivered yet: job id -> workflow id."""
        with self.guard(queue):
            raw = cast("dict[bytes, bytes]", self.client.hgetall(QueueKeys(queue).outbox))
        return {k.decode(errors="replace"): v.decode(errors="replace") for k, v in raw.items()}

    def delivered(self, reports: Sequence[StepReport]) -> None:
        """These reports reached their workflows: drop them from their outboxes (one pipeline)."""
        by_queue = _by_queue(reports)
        if not by_queue:
            return
        with self.guard(*by_queue):
            pipe = self.client.pipeline(transaction=False)
            for queue, ids in by_queue.items():
                pipe.hdel(QueueKeys(queue).outbox, *ids)
            pipe.execute()

    def step_records(self, steps: Sequence[tuple[str, str]]) -> list[dict[bytes, bytes]]:
        """The raw records of (queue, job id) pairs, in one pipeline ({} for a step not stored)."""
        with broker_errors(self.url):
            pipe = self.client.pipeline(transaction=False)
            plans.read_steps(pipe, steps)
            return plans.step_records(pipe.execute(raise_on_error=False))

    # -- the index of all workflows ----------------------------------------

    def launching_since(self, before_ms: int, limit: int = 100) -> list[str]:
        """Workflows marked launching before ``before_ms``: their producer may have died."""
        with broker_errors(self.url):
            raw = junk.read(
                lambda: self.client.zrangebyscore(WORKFLOW_LAUNCHING, "-inf", before_ms, start=0, num=limit),
                WORKFLOW_LAUNCHING,
                [],
            )
        return junk.texts(raw, WORKFLOW_LAUNCHING)

    def workflow_counts(self) -> dict[str, int]:
        """How many workflows are running, and how many ended in each way within the retention."""
        since = _now_ms() - self.retention_ms
        with broker_errors(self.url):
            pipe = self.client.pipeline(transaction=False)
            for state in WORKFLOW_STATES:
                if state == "running":
                    pipe.zcard(workflow_index(state))
                else:
                    pipe.zcount(workflow_index(state), since, "+inf")
            counts = junk.replies(pipe.execute(raise_on_error=False), [workflow_index(s) for s in WORKFLOW_STATES], 0)
        return dict(zip(WORKFLOW_STATES, (int(c) for c in counts), strict=True))

    def running_workflows(self, offset: int, count: int, before_ms: int) -> list[str]:
        """Running workflows created before ``before_ms``, oldest first, from ``offset``."""
        key = workflow_index("running")
        with broker_errors(self.url):
            raw = junk.read(lambda: self.client.zrangebyscore(key, "-inf", before_ms, start=offset, num=count), key, [])
        return junk.texts(raw, key)

    def workflow_ids(self, state: str, limit: int = 50) -> list[str]:
        """The newest workflows in ``state`` (see ``WORKFLOW_STATES``)."""
        key = workflow_index(state)
        with broker_errors(self.url):
            raw = junk.read(lambda: self.client.zrevrange(key, 0, limit - 1), key, [])
        return junk.texts(raw, key)


def replica_missed(what: str, url: str, again: str) -> str:
    """The ``BrokerUnavailable`` message when no replica confirmed a workflow script's write in time."""
    return (
        f"{what} was written to the master at {redact(url)} but no replica confirmed it "
        f"within {REPLICA_WAIT_MS} ms (durability='replicated'); it will be {again} again"
    )
