"""The broker's side of workflows: their scripts, the queues' outboxes and the index of workflows.

A workflow's state lives in Redis under its own hash tag (``WorkflowKeys``),
so its scripts are single-slot wherever its steps' queues are. A step's final
transition leaves a report in its own queue's outbox (``finish`` in
``lua/lib/finish.lua``); ``taskforge.workflows.delivery`` carries it to the workflow and
sends what may go next. This module only speaks to Redis.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, cast

from . import calls, junk
from . import workflow_plans as plans
from .connection import broker_errors
from .drivers import adrive, drive
from .keys import (
    WORKFLOW_LAUNCHING,
    WORKFLOW_RESUMING,
    WORKFLOW_STATES,
    QueueKeys,
    WorkflowKeys,
    workflow_index,
)
from .replies import ResumeReply, WorkflowReply
from .slots import script_after

if TYPE_CHECKING:
    from .aio import AsyncLink
    from .link import Link


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


class WorkflowStore:
    """The workflow ledger (``Broker.ledger``): workflows' records, their index, the steps' outboxes."""

    def __init__(self, link: Link) -> None:
        self.link = link
        self.client: Any = link.client
        self.cluster = link.cluster
        self.scripts = link.scripts
        self.url = link.url
        self.retention_ms = link.retention_ms
        self.guard = link.guard

    # -- a workflow's own slot -------------------------------------------

    def create_workflow(self, workflow: str, steps: int, fields: Sequence[tuple[str, bytes | str]]) -> None:
        """Store a new workflow; marked as launching until ``workflow_launched`` says its first steps are sent."""
        drive(self.link, plans.create_workflow(workflow, steps, fields, self.url))

    def workflow_launched(self, workflow: str) -> None:
        """Its first steps are stored: no longer launching."""
        drive(self.link, plans.unmark(WORKFLOW_LAUNCHING, workflow))

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
            return [drive(self.link, plans.report_step(call, self.url)) for call in batch]

    def mark_resuming(self, workflow: str) -> None:
        """A resume begins (``workflows.resume``): marked until its steps are sent, in case this process dies."""
        drive(self.link, plans.mark_resuming(workflow))

    def resume_workflow(self, workflow: str, finish: bool = False) -> ResumeReply:
        """``workflow_resume``: a dead workflow is running again (``finish``: answer for a running one too)."""
        return drive(self.link, plans.resume_workflow(workflow, finish, self.url))

    def list_running(self, workflow: str) -> None:
        """A resumed workflow is listed as running again (and no longer as dead)."""
        drive(self.link, plans.list_running(workflow))

    def workflow_resumed(self, workflow: str) -> None:
        """Its steps are made ready and sent: no longer resuming."""
        drive(self.link, plans.unmark(WORKFLOW_RESUMING, workflow))

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
        return drive(self.link, plans.cancel_workflow(workflow, self.retention_ms))

    def workflow_flight(self, workflow: str) -> WorkflowReply:
        """Every step of ``workflow`` free to go and not reported, a slice per call (``FLIGHT_SLICE``)."""
        return drive(self.link, plans.workflow_flight(workflow))

    def settle_workflow(self, workflow: str, state: str) -> None:
        self.settle_workflows([(workflow, state)])

    def settle_workflows(self, ended: Sequence[tuple[str, str]]) -> None:
        """Ended workflows listed under their final states, then those not succeeded settled
        (``workflow_plans.settle_workflows``)."""
        drive(self.link, plans.settle_workflows(ended, self.retention_ms))

    def _list(self, pipe: Any, ended: Sequence[tuple[str, str]]) -> None:
        """Queue on ``pipe`` the index writes that list ended workflows under their final states."""
        plans.list_ended(pipe, ended, plans.now_ms(), self.retention_ms)

    def read_workflow(self, workflow: str) -> dict[bytes, bytes] | None:
        """The raw workflow record, or None when there is none (never was, or expired)."""
        return drive(self.link, plans.read_workflow(workflow))

    def workflow_fields(self, workflow: str, names: Sequence[str]) -> list[bytes | None]:
        return drive(self.link, plans.workflow_fields(workflow, names))

    def wait_workflow(self, workflow: str, timeout: float) -> bool:
        """Block until the workflow's done list exists (it ended); non-destructive, so many may wait."""
        return drive(self.link, plans.wait_workflow(workflow, timeout))

    # -- the steps' queues -----------------------------------------------

    def cancel_steps(self, queue: str, workflow: str, job_ids: Sequence[str]) -> int:
        """Steps of an ended workflow cancelled, ``STEP_SLICE`` per call (a step cancelled twice counts once)."""
        return drive(self.link, plans.cancel_steps(queue, workflow, job_ids, self.retention_ms))

    def replan_steps(self, queue: str, workflow: str, on_failure: str, phase: str, job_ids: Sequence[str]) -> list[str]:
        """``replan_steps``: a resumed workflow's steps on ``queue`` may go again; the ids moved to pending."""
        return drive(self.link, plans.replan_steps(queue, workflow, on_failure, phase, job_ids))

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
        return drive(self.link, plans.read_step_records(steps))

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
        since = plans.now_ms() - self.retention_ms
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


class AsyncWorkflowStore:
    """``WorkflowStore``'s producer operations on one event loop (``AsyncBroker.ledger``): the same plans."""

    def __init__(self, link: AsyncLink) -> None:
        self.link = link
        self.url = link.url
        self.retention_ms = link.retention_ms

    async def create_workflow(self, workflow: str, steps: int, fields: Sequence[tuple[str, bytes | str]]) -> None:
        await adrive(self.link, plans.create_workflow(workflow, steps, fields, self.url))

    async def workflow_launched(self, workflow: str) -> None:
        await adrive(self.link, plans.unmark(WORKFLOW_LAUNCHING, workflow))

    async def workflow_flight(self, workflow: str) -> WorkflowReply:
        return await adrive(self.link, plans.workflow_flight(workflow))

    async def mark_resuming(self, workflow: str) -> None:
        await adrive(self.link, plans.mark_resuming(workflow))

    async def resume_workflow(self, workflow: str, finish: bool = False) -> ResumeReply:
        return await adrive(self.link, plans.resume_workflow(workflow, finish, self.url))

    async def list_running(self, workflow: str) -> None:
        await adrive(self.link, plans.list_running(workflow))

    async def workflow_resumed(self, workflow: str) -> None:
        await adrive(self.link, plans.unmark(WORKFLOW_RESUMING, workflow))

    async def replan_steps(
        self, queue: str, workflow: str, on_failure: str, phase: str, job_ids: Sequence[str]
    ) -> list[str]:
        return await adrive(self.link, plans.replan_steps(queue, workflow, on_failure, phase, job_ids))

    async def cancel_workflow(self, workflow: str) -> WorkflowReply:
        return await adrive(self.link, plans.cancel_workflow(workflow, self.retention_ms))

    async def report_step(self, workflow: str, step: int, state: str, result: bytes, error: str) -> WorkflowReply:
        """One step's report to its workflow (counted once however often it is sent)."""
        call = calls.workflow_report(
            WorkflowKeys(workflow), step=step, state=state, result=result, error=error, retention_ms=self.retention_ms
        )
        return await adrive(self.link, plans.report_step(call, self.url))

    async def settle_workflow(self, workflow: str, state: str) -> None:
        await adrive(self.link, plans.settle_workflows([(workflow, state)], self.retention_ms))

    async def read_workflow(self, workflow: str) -> dict[bytes, bytes] | None:
        return await adrive(self.link, plans.read_workflow(workflow))

    async def workflow_fields(self, workflow: str, names: Sequence[str]) -> list[bytes | None]:
        return await adrive(self.link, plans.workflow_fields(workflow, names))

    async def wait_workflow(self, workflow: str, timeout: float) -> bool:
        return await adrive(self.link, plans.wait_workflow(workflow, timeout))

    async def cancel_steps(self, queue: str, workflow: str, job_ids: Sequence[str]) -> int:
        return await adrive(self.link, plans.cancel_steps(queue, workflow, job_ids, self.retention_ms))

    async def step_records(self, steps: Sequence[tuple[str, str]]) -> list[dict[bytes, bytes]]:
        return await adrive(self.link, plans.read_step_records(steps))

    async def delivered(self, queue: str, job_ids: Sequence[str]) -> None:
        """These steps' reports reached their workflows: drop them from the queue's outbox."""
        await adrive(self.link, plans.drop_from_outbox(queue, job_ids))
