"""The async twins of ``roles.py``'s protocols: what ``AsyncBroker``'s roles offer, awaited.

``AsyncJobsRole`` is ``JobsRole`` and ``AsyncWorkflowRole`` is
``WorkflowRole`` with every method a coroutine and nothing else changed
(``tests/broker/test_roles.py`` compares them name for name and parameter
for parameter), so the sync and async producers stay in step.
``AsyncLedgerRole`` adds what only the async producer does its own way.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, TypeVar

if TYPE_CHECKING:
    from .plan import Plan, Settings
    from .record import NewJob
    from .replies import AbortOutcome, CancelOutcome, ResumeReply, WorkflowReply
    from .stream_reads import StreamRead

T = TypeVar("T")


class AsyncJobsRole(Protocol):
    """``JobsRole``, awaited (``aio.AsyncJobs``)."""

    async def enqueue(
        self, queue: str, jobs: Sequence[NewJob], max_size: int = 0, resend: bool = False
    ) -> list[str]: ...

    async def read(self, queue: str, job_id: str) -> dict[bytes, bytes] | None: ...

    async def queues(self) -> list[str]: ...

    async def cancel(self, queue: str, job_id: str) -> CancelOutcome: ...

    async def abort(self, queue: str, job_id: str) -> AbortOutcome: ...

    async def await_state(self, queue: str, job_id: str) -> str | None: ...

    async def wait_done(self, queue: str, job_id: str, timeout: float) -> bool: ...

    async def read_stream(self, queue: str, job_id: str, after: str, block: float) -> StreamRead: ...


class AsyncFlowRole(Protocol):
    """``FlowRole``, awaited (``flow.AsyncFlow``)."""

    async def pause(self, queue: str) -> bool: ...

    async def resume(self, queue: str) -> bool: ...

    async def paused(self, queues: Sequence[str]) -> set[str]: ...

    async def held_reason(self, queue: str, fields: dict[bytes, bytes]) -> str | None: ...


class AsyncWorkflowRole(Protocol):
    """``WorkflowRole``, awaited."""

    async def create_workflow(self, workflow: str, steps: int, fields: Sequence[tuple[str, bytes | str]]) -> None: ...

    async def workflow_launched(self, workflow: str) -> None: ...

    async def workflow_flight(self, workflow: str) -> WorkflowReply: ...

    async def mark_resuming(self, workflow: str) -> None: ...

    async def resume_workflow(self, workflow: str, finish: bool = False) -> ResumeReply: ...

    async def list_running(self, workflow: str) -> None: ...

    async def workflow_resumed(self, workflow: str) -> None: ...

    async def replan_steps(
        self, queue: str, workflow: str, on_failure: str, phase: str, job_ids: Sequence[str]
    ) -> list[str]: ...

    async def cancel_workflow(self, workflow: str) -> WorkflowReply: ...

    async def settle_workflow(self, workflow: str, state: str) -> None: ...

    async def read_workflow(self, workflow: str) -> dict[bytes, bytes] | None: ...

    async def workflow_fields(self, workflow: str, names: Sequence[str]) -> list[bytes | None]: ...

    async def wait_workflow(self, workflow: str, timeout: float) -> bool: ...

    async def cancel_steps(self, queue: str, workflow: str, job_ids: Sequence[str]) -> int: ...

    async def step_records(self, steps: Sequence[tuple[str, str]]) -> list[dict[bytes, bytes]]: ...


class AsyncLedgerRole(AsyncWorkflowRole, Protocol):
    """The async ledger (``workflows.AsyncWorkflowStore``): one step's report at a time, and its drop."""

    async def report_step(self, workflow: str, step: int, state: str, result: bytes, error: str) -> WorkflowReply: ...

    async def delivered(self, queue: str, job_ids: Sequence[str]) -> None: ...


class AsyncBrokerRoles(Protocol):
    """Every role of one app's broker on one event loop (``aio.AsyncBroker``)."""

    @property
    def url(self) -> str: ...

    @property
    def jobs(self) -> AsyncJobsRole: ...

    @property
    def ledger(self) -> AsyncLedgerRole: ...

    @property
    def flow(self) -> AsyncFlowRole: ...

    @property
    def settings(self) -> Settings: ...

    async def drive(self, plan: Plan[T]) -> T: ...
