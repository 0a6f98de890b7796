"""The workflow ledger of ``AsyncBroker``: ``WorkflowStore``'s producer operations, awaited.

Same keys, same scripts, same order of writes as ``workflows.py`` (the
launching mark before the record; the index before ``workflow_settle``), so
a workflow launched from async code is repaired by the same reconciler.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypeVar, cast

import redis

from ..errors import BrokerUnavailable
from . import calls, workflow_pieces
from . import workflow_plans as plans
from .aio_connection import wait_for_list
from .calls import ScriptCall
from .connection import broker_errors
from .keys import WORKFLOW_LAUNCHING, WORKFLOW_RESUMING, QueueKeys, WorkflowKeys, workflow_index
from .replies import ResumeReply, WorkflowReply
from .workflows import FLIGHT_SLICE, replica_missed, sliced

if TYPE_CHECKING:
    from .aio import AsyncLink

T = TypeVar("T")


def _now_ms() -> int:
    return int(time.time() * 1000)


class AsyncWorkflowStore:
    """``WorkflowStore``, awaited: the ledger's producer side on one event loop (``AsyncBroker.ledger``)."""

    def __init__(self, link: AsyncLink) -> None:
        self.client: Any = link.client
        self.url = link.url
        self.retention_ms = link.retention_ms
        self.replicated = link.replicated
        self.memory = link.memory
        self.run = link.run
        self.write = link.write
        self.guard = link.guard

    async def create_workflow(self, workflow: str, steps: int, fields: Sequence[tuple[str, bytes | str]]) -> None:
        """``WorkflowStore.create_workflow``: the launching mark first, then the record."""
        with broker_errors(self.url):
            pipe = self.client.pipeline(transaction=False)
            plans.mark_launching(pipe, workflow, _now_ms())
            await pipe.execute()
            w = WorkflowKeys(workflow)
            pieces = workflow_pieces.split(steps, fields)
            for piece in pieces or ():
                await self.run(workflow_pieces.stage(w, piece))
            call: ScriptCall[Any] = (
                calls.workflow_create(w, steps=steps, fields=fields) if pieces is None else workflow_pieces.commit(w)
            )
            done = await self._replicated(call, "the workflow") if self.replicated else await self.run(call)
            if done == -1:
                raise workflow_pieces.expired(workflow)

    async def workflow_launched(self, workflow: str) -> None:
        with broker_errors(self.url):
            await self.client.zrem(WORKFLOW_LAUNCHING, workflow)

    async def workflow_flight(self, workflow: str) -> WorkflowReply:
        """``WorkflowStore.workflow_flight``: a slice per call."""
        w, cursor, ready = WorkflowKeys(workflow), "0", []
        with broker_errors(self.url):
            while True:
                reply, cursor = await self.run(calls.workflow_flight(w, cursor=cursor, count=FLIGHT_SLICE))
                ready += reply.ready
                if cursor == "0":
                    return reply._replace(ready=ready)

    async def mark_resuming(self, workflow: str) -> None:
        """``WorkflowStore.mark_resuming``."""
        with broker_errors(self.url):
            await self.client.zadd(WORKFLOW_RESUMING, {workflow: _now_ms()})

    async def resume_workflow(self, workflow: str, finish: bool = False) -> ResumeReply:
        """``WorkflowStore.resume_workflow``."""
        call = calls.workflow_resume(WorkflowKeys(workflow), finish=finish)
        with broker_errors(self.url):
            if self.replicated:
                return await self._replicated(call, "the resume of a workflow", "done")
            return await self.run(call)

    async def list_running(self, workflow: str) -> None:
        """``WorkflowStore.list_running``."""
        with broker_errors(self.url):
            pipe = self.client.pipeline(transaction=False)
            pipe.zrem(workflow_index("dead"), workflow)
            pipe.zadd(workflow_index("running"), {workflow: _now_ms()}, nx=True)
            await pipe.execute()

    async def workflow_resumed(self, workflow: str) -> None:
        with broker_errors(self.url):
            await self.client.zrem(WORKFLOW_RESUMING, workflow)

    async def replan_steps(
        self, queue: str, workflow: str, on_failure: str, phase: str, job_ids: Sequence[str]
    ) -> list[str]:
        """``WorkflowStore.replan_steps``."""
        q, moved = QueueKeys(queue), list[str]()
        async with self.guard(queue):
            for ids in sliced(job_ids):
                call = calls.replan_steps(q, workflow=workflow, on_failure=on_failure, phase=phase, job_ids=ids)
                got: list[str] = await self.run(call)
                moved += got
        return moved

    async def cancel_workflow(self, workflow: str) -> WorkflowReply:
        call = calls.workflow_cancel(WorkflowKeys(workflow), retention_ms=self.retention_ms)
        with broker_errors(self.url):
            return await self.run(call)

    async def report_step(self, workflow: str, step: int, state: str, result: bytes, error: str) -> WorkflowReply:
        """One step's report to its workflow (counted once however often it is sent)."""
        call = calls.workflow_report(
            WorkflowKeys(workflow), step=step, state=state, result=result, error=error, retention_ms=self.retention_ms
        )
        with broker_errors(self.url):
            if self.replicated:
                return await self._replicated(call, "a workflow report")
            return await self.run(call)

    async def _replicated(self, call: ScriptCall[T], what: str, again: str = "sent") -> T:
        """``WorkflowStore._replicated``, awaited: run a workflow script and wait for a replica, or raise."""
        reply, acked = await self.write(call)
        if acked == 0:
            raise BrokerUnavailable(replica_missed(what, self.url, again))
        return reply

    async def settle_workflow(self, workflow: str, state: str) -> None:
        """``WorkflowStore.settle_workflow``: the index first, then the script that says it is settled."""
        with broker_errors(self.url):
            pipe = self.client.pipeline(transaction=False)
            plans.list_ended(pipe, [(workflow, state)], _now_ms(), self.retention_ms)
            await pipe.execute()
            await self.run(calls.workflow_settle(WorkflowKeys(workflow)))

    async def read_workflow(self, workflow: str) -> dict[bytes, bytes] | None:
        with broker_errors(self.url):
            try:
                fields = await self.client.hgetall(WorkflowKeys(workflow).record)
            except redis.ResponseError:
                return None
        return cast("dict[bytes, bytes]", fields) or None

    async def workflow_fields(self, workflow: str, names: Sequence[str]) -> list[bytes | None]:
        with broker_errors(self.url):
            return cast("list[bytes | None]", await self.client.hmget(WorkflowKeys(workflow).record, list(names)))

    async def wait_workflow(self, workflow: str, timeout: float) -> bool:
        with broker_errors(self.url):
            return await wait_for_list(self.client, WorkflowKeys(workflow).done, timeout, self.memory)

    async def cancel_steps(self, queue: str, workflow: str, job_ids: Sequence[str]) -> int:
        """``WorkflowStore.cancel_steps``: a slice per call."""
        q, cancelled = QueueKeys(queue), 0
        async with self.guard(queue):
            for ids in sliced(job_ids):
                call = calls.cancel_steps(q, workflow=workflow, retention_ms=self.retention_ms, job_ids=ids)
                cancelled += await self.run(call)
        return cancelled

    async def step_records(self, steps: Sequence[tuple[str, str]]) -> list[dict[bytes, bytes]]:
        """The raw records of (queue, job id) pairs in one pipeline ({} for a step not stored)."""
        if not steps:
            return []
        with broker_errors(self.url):
            pipe = self.client.pipeline(transaction=False)
            plans.read_steps(pipe, steps)
            return plans.step_records(await pipe.execute(raise_on_error=False))

    async def delivered(self, queue: str, job_ids: Sequence[str]) -> None:
        """These steps' reports reached their workflows: drop them from the queue's outbox."""
        async with self.guard(queue):
            await self.client.hdel(QueueKeys(queue).outbox, *job_ids)
