"""The broker's roles as protocols: what each caller may use of it.

A ``Broker`` (``compose.py``) is role objects over one ``Link``; each
caller is typed against the role it uses, so a producer cannot reach a
claim, nor a worker an operator's purge, unnoticed:

- ``JobsRole``: store, follow, cancel and abort jobs (``Task``, ``JobHandle``).
- ``ClaimsRole``: claim jobs, record their outcomes, keep their leases (the worker, ``app.drain()``).
- ``WorkflowRole``, within ``LedgerRole``: workflows' records, and the index
  and outboxes the courier, the reconciler and the dashboard read.
- ``InspectionRole``: counts and listings (``taskforge status``, the dashboard).
- ``CleanupRole``: purges, dead-letter retries, deleting a queue.
- ``StepsRole``: a running job's durable steps (``current_job().step``).

``aio_roles.py`` holds the async twins of ``JobsRole`` and ``WorkflowRole``:
the same methods, awaited (``tests/broker/test_roles.py`` holds the pairs
together, name for name and parameter for parameter).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Protocol, TypeVar

from ..job import FailureKind
from .cleanup import PURGE_SLICE

if TYPE_CHECKING:
    import redis

    from .hints import ClaimHints
    from .plan import Plan, Settings
    from .record import NewJob
    from .replies import (
        AbortOutcome,
        CancelOutcome,
        ClaimBatch,
        ExtendResult,
        FailOutcome,
        QueueHead,
        ReclaimResult,
        ResumeReply,
        WorkflowReply,
    )
    from .stats import Tally
    from .stream_reads import StreamRead
    from .timings import TaskTimings
    from .workflows import StepReport

T = TypeVar("T")


class JobsRole(Protocol):
    """Producing: what a ``Task`` and a ``JobHandle`` call (``jobs.Jobs``)."""

    def enqueue(self, queue: str, jobs: Sequence[NewJob], max_size: int = 0, resend: bool = False) -> list[str]: ...

    def read(self, queue: str, job_id: str) -> dict[bytes, bytes] | None: ...

    def queues(self) -> list[str]: ...

    def cancel(self, queue: str, job_id: str) -> CancelOutcome: ...

    def abort(self, queue: str, job_id: str) -> AbortOutcome: ...

    def await_state(self, queue: str, job_id: str) -> str | None: ...

    def wait_done(self, queue: str, job_id: str, timeout: float) -> bool: ...

    def read_stream(self, queue: str, job_id: str, after: str, block: float) -> StreamRead: ...


class ClaimsRole(Protocol):
    """Claiming: what a worker's lanes, runner and supervisor call (``queue.Claims``)."""

    @property
    def hints(self) -> ClaimHints: ...

    @property
    def tally(self) -> Tally: ...

    @property
    def pipelined_wait(self) -> bool: ...

    def dequeue(self, queue: str, lease_ms: int, count: int = 1, token: str | None = None) -> ClaimBatch: ...

    def succeed(self, queue: str, job_id: str, token: str, result: bytes) -> bool: ...

    def succeed_and_claim(
        self, queue: str, job_id: str, token: str, result: bytes, lease_ms: int, next_token: str
    ) -> tuple[bool, ClaimBatch]: ...

    def settle(
        self,
        queue: str,
        results: Sequence[tuple[str, str, bytes]],
        lease_ms: int = 0,
        next_token: str = "",
        count: int = 1,
        started: Sequence[tuple[str, str]] = (),
    ) -> tuple[list[bool], ClaimBatch | None]: ...

    def fail(
        self,
        queue: str,
        job_id: str | bytes,
        token: str,
        error: str,
        traceback: str,
        retry_in: float | None,
        kind: FailureKind = FailureKind.EXCEPTION,
        error_type: str | None = None,
    ) -> FailOutcome: ...

    def adopt(
        self, queue: str, job_id: str, token: str, max_attempts: int, timeout: float | None, max_worker_losses: int = 2
    ) -> bool: ...

    def peek(self, queues: Sequence[str]) -> list[QueueHead]: ...

    def progress(
        self, queue: str, job_id: str, token: str, fraction: float, message: str | None, meta: bytes = b""
    ) -> bool: ...

    def fast_forward(self, queue: str, seconds: float) -> int: ...

    def extend(self, queue: str, lease_ms: int, claims: Iterable[tuple[str, str]]) -> ExtendResult: ...

    def abandon(self, queue: str, job_id: str, token: str) -> bool: ...

    def reclaim(self, queue: str) -> ReclaimResult: ...

    def requeue(self, queue: str, job_id: str, token: str, interrupted: str = "") -> bool: ...

    def pass_job(self, queue: str, job_id: str, token: str, delay_ms: int, cap_ms: int) -> int: ...

    def expire_owner(self, queue: str, owner: str) -> int: ...

    def wake_keys(self, queues: Iterable[str]) -> list[str]: ...

    def wait_for_work(self, queues: Sequence[str], timeout: float) -> bool: ...

    def wait_and_dequeue(self, queue: str, timeout: float, lease_ms: int, token: str) -> ClaimBatch: ...

    def register_limits(self, queue: str, limits: dict[str, str]) -> None: ...

    def job_fields(self, queue: str, job_id: str, names: Sequence[str]) -> list[str | None]: ...


class WorkflowRole(Protocol):
    """A workflow's own operations: launch, follow, cancel, resume (``AsyncWorkflowRole`` is its twin)."""

    def create_workflow(self, workflow: str, steps: int, fields: Sequence[tuple[str, bytes | str]]) -> None: ...

    def workflow_launched(self, workflow: str) -> None: ...

    def mark_resuming(self, workflow: str) -> None: ...

    def resume_workflow(self, workflow: str, finish: bool = False) -> ResumeReply: ...

    def list_running(self, workflow: str) -> None: ...

    def workflow_resumed(self, workflow: str) -> None: ...

    def cancel_workflow(self, workflow: str) -> WorkflowReply: ...

    def workflow_flight(self, workflow: str) -> WorkflowReply: ...

    def settle_workflow(self, workflow: str, state: str) -> None: ...

    def read_workflow(self, workflow: str) -> dict[bytes, bytes] | None: ...

    def workflow_fields(self, workflow: str, names: Sequence[str]) -> list[bytes | None]: ...

    def wait_workflow(self, workflow: str, timeout: float) -> bool: ...

    def cancel_steps(self, queue: str, workflow: str, job_ids: Sequence[str]) -> int: ...

    def replan_steps(
        self, queue: str, workflow: str, on_failure: str, phase: str, job_ids: Sequence[str]
    ) -> list[str]: ...

    def step_records(self, steps: Sequence[tuple[str, str]]) -> list[dict[bytes, bytes]]: ...


class LedgerRole(WorkflowRole, Protocol):
    """The whole workflow ledger (``workflows.WorkflowStore``): also the steps' outboxes and the index
    of all workflows, for the courier, the reconciler and the dashboard."""

    def report_steps(
        self, reports: Sequence[StepReport], dropped: Sequence[StepReport] = (), listed: Sequence[str] = ()
    ) -> list[WorkflowReply]: ...

    def resuming_since(self, before_ms: int, limit: int = 100) -> list[str]: ...

    def settle_workflows(self, ended: Sequence[tuple[str, str]]) -> None: ...

    def outbox(self, queue: str) -> dict[str, str]: ...

    def delivered(self, reports: Sequence[StepReport]) -> None: ...

    def launching_since(self, before_ms: int, limit: int = 100) -> list[str]: ...

    def workflow_counts(self) -> dict[str, int]: ...

    def running_workflows(self, offset: int, count: int, before_ms: int) -> list[str]: ...

    def workflow_ids(self, state: str, limit: int = 50) -> list[str]: ...


class InspectionRole(Protocol):
    """Reading queues for the operators' tools (``inspection.Inspection``)."""

    def limited_groups(self, queue: str) -> list[str]: ...

    def counts(self, queue: str) -> dict[str, int]: ...

    def pending_by_priority(self, queue: str) -> dict[int, int]: ...

    def next_due_ms(self, queue: str) -> int | None: ...

    def due_count(self, queue: str) -> int: ...

    def scheduled_states(self, queue: str, sample: int) -> tuple[int, list[str]]: ...

    def dead_ids(self, queue: str, limit: int) -> list[tuple[str, int]]: ...

    def read_many(self, queue: str, job_ids: Sequence[str]) -> list[dict[bytes, bytes] | None]: ...

    def page(self, queue: str, state: str, offset: int, count: int) -> tuple[int, list[tuple[str, int]]]: ...

    def expired_last_hour(self, queue: str) -> int: ...

    def outcome_history(
        self, queues: Sequence[str], minutes: int = 60
    ) -> tuple[int, dict[str, list[tuple[int, int]]]]: ...

    def task_timings(
        self, queues: Sequence[str], minutes: int = 60
    ) -> tuple[int, dict[str, dict[str, TaskTimings]]]: ...


class CleanupRole(Protocol):
    """Emptying what queues hold (``cleanup.Cleanup``)."""

    def retry_dead(self, queue: str, job_ids: Sequence[str] = (), limit: int = PURGE_SLICE) -> list[str]: ...

    def oldest_dead(self, queue: str, limit: int) -> list[str]: ...

    def delete(self, queue: str, job_ids: Sequence[str]) -> int: ...

    def cancel_each(self, queue: str, job_ids: Sequence[str]) -> list[CancelOutcome]: ...

    def purge(self, queue: str, which: str) -> int: ...

    def tidy(self, queue: str) -> int: ...

    def forget(self, queue: str) -> int: ...
    def sweep(self, queue: str, budget: float) -> tuple[int, bool]: ...

    def clear(self, queue: str) -> int: ...


class FlowRole(Protocol):
    """Whole queues held or let go (pause and resume), and jobs held back by limits (``flow.Flow``)."""

    def pause(self, queue: str) -> bool: ...

    def resume(self, queue: str) -> bool: ...

    def paused(self, queues: Sequence[str]) -> set[str]: ...

    def held(self, queue: str) -> int: ...

    def held_reason(self, queue: str, fields: dict[bytes, bytes]) -> str | None: ...


class IndexRole(Protocol):
    """Reading the queues' search indexes, for ``find_jobs`` and bulk actions (``index.Index``)."""

    def count(self, queue: str, prefix: bytes, since: bytes = b"") -> int: ...

    def entries(self, queue: str, prefix: bytes, below: bytes | None, since: bytes, count: int) -> list[bytes]: ...

    def live(self, queue: str, which: str, most: int) -> list[str] | None: ...

    def fields(self, queue: str, job_ids: Sequence[str], names: Sequence[str]) -> list[list[bytes | None]]: ...


class StepsRole(Protocol):
    """A running job's durable steps: their results kept with the job, fenced by its claim (``steps.Steps``)."""

    def stored(self, queue: str, job_id: str, name: str) -> bytes | None: ...

    def store(self, queue: str, job_id: str, token: str, name: str, result: bytes) -> bool: ...

    def slept(self, queue: str, job_id: str, index: int) -> bool: ...

    def sleep(self, queue: str, job_id: str, token: str, index: int, due_ms: int, delay_ms: int) -> int: ...

    def append(self, queue: str, job_id: str, token: str, item: bytes, index: int) -> bool: ...


class BrokerRoles(Protocol):
    """Every role of one app's broker (``compose.Broker``), for callers that use several."""

    @property
    def client(self) -> redis.Redis | redis.RedisCluster: ...

    @property
    def url(self) -> str: ...

    @property
    def jobs(self) -> JobsRole: ...

    @property
    def claims(self) -> ClaimsRole: ...

    @property
    def ledger(self) -> LedgerRole: ...

    @property
    def inspection(self) -> InspectionRole: ...

    @property
    def cleanup(self) -> CleanupRole: ...

    @property
    def flow(self) -> FlowRole: ...

    @property
    def steps(self) -> StepsRole: ...

    @property
    def index(self) -> IndexRole: ...

    @property
    def settings(self) -> Settings: ...

    def drive(self, plan: Plan[T]) -> T: ...
