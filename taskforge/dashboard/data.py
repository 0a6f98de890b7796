"""What the dashboard shows, as plain data: built on ``taskforge.status``, never reading a whole queue.

The overview is ``status.status`` (the ``status --json`` document) plus the
last hour of per-minute outcome counts; job lists are pages of one Redis set
(``Inspection.page``), so a queue of a million jobs costs what a queue of fifty
does. Workflows: a page is ``WorkflowInfo`` (every step); the list reads only
the newest ids of each state and a few fields of each record, so a group of
10,000 members costs a list what a chain of two does.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

import redis

from .. import status
from ..broker.keys import WORKFLOW_STATES, validate_queue_name
from ..broker.server_health import DENIED
from ..errors import ConfigurationError, CorruptPayload, TaskforgeError
from ..handle import job_info
from ..job import JobInfo, ms_to_datetime
from ..job_json import job_to_json, workflow_to_json
from ..workflows.handle import WorkflowHandle, WorkflowInfo
from ..workflows.record import StepField, WorkflowField
from ..workflows.spec import StepSpec

if TYPE_CHECKING:
    from ..app import TaskForge

PAGE_SIZE = 50
OVERVIEW_QUEUES = 100  # queues per overview page
SERVER_CHECK_EVERY = 30.0  # seconds a page reuses the last look at the server's settings
SERVER_DENIED_AGAIN = 3600.0  # and when the server refused to say
MINUTES = 60
STATES = ("pending", "scheduled", "running", "dead")
WORKFLOWS_SHOWN = 20  # per state on the workflows page: each costs one small read
MAX_WORKFLOWS = 500
# What a workflow list shows, read with one HMGET: never the per-step fields of a 10,000-member group.
SUMMARY_FIELDS = (
    *(f.value for f in (WorkflowField.STATE, WorkflowField.STEPS, WorkflowField.CREATED_AT)),
    *(f.value for f in (WorkflowField.FINISHED_AT, WorkflowField.ERROR, WorkflowField.FAILED_STEP)),
    StepField.SPEC.at(0),
)


@dataclass(frozen=True)
class History:
    """Runs succeeded and failed per minute over the last hour, per queue, oldest minute first."""

    first_minute: datetime
    queues: dict[str, list[tuple[int, int]]]

    def totals(self, queue: str) -> dict[str, Any]:
        minutes = self.queues.get(queue, [])
        succeeded = sum(s for s, _ in minutes)
        failed = sum(f for _, f in minutes)
        runs = succeeded + failed
        return {
            "succeeded_last_hour": succeeded,
            "failed_last_hour": failed,
            "throughput_per_minute": round(runs / MINUTES, 2),
            "failure_rate": round(failed / runs, 4) if runs else 0.0,
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "first_minute": status.iso(self.first_minute),
            "minutes": MINUTES,
            "queues": {
                name: {**self.totals(name), "succeeded": [s for s, _ in rows], "failed": [f for _, f in rows]}
                for name, rows in self.queues.items()
            },
        }

    def bars(self, queue: str, height: int = 40) -> list[dict[str, int]]:
        """The chart's bars: one per minute, succeeded stacked on failed, scaled to the busiest minute."""
        minutes = self.queues.get(queue, [])
        peak = max((s + f for s, f in minutes), default=0) or 1
        bars = []
        for i, (s, f) in enumerate(minutes):
            failed = round(f * height / peak)
            succeeded = round(s * height / peak)
            bars.append({"x": i * 3, "failed": failed, "succeeded": succeeded, "runs": s + f, "s": s, "f": f})
        return bars


def history(app: TaskForge, queues: list[str]) -> History:
    """The last hour per queue; only queues with a stats key in that hour are read minute by minute
    (``queue_probe.py``): thousands of idle queues cost one short script call each, not 60 reads."""
    from ..broker.queue_probe import QueueProbe

    found = QueueProbe(app.broker.link).probe(queues)
    active = {q for q, probe in found.items() if probe.active}
    first, rows = app.broker.inspection.outcome_history([q for q in queues if q in active], MINUTES)
    idle = [(0, 0)] * MINUTES
    return History(ms_to_datetime(first) or status.now_utc(), {q: rows.get(q, list(idle)) for q in queues})


@dataclass(frozen=True)
class JobPage:
    """One page of one queue's jobs in one state."""

    queue: str
    state: str
    page: int
    total: int
    jobs: list[JobInfo]
    missing: list[str]  # ids listed in the set whose record is gone (expired or damaged)

    @property
    def pages(self) -> int:
        return max(1, -(-self.total // PAGE_SIZE))

    def to_dict(self) -> dict[str, Any]:
        return {
            "queue": self.queue,
            "state": self.state,
            "page": self.page,
            "pages": self.pages,
            "page_size": PAGE_SIZE,
            "total": self.total,
            "jobs": [job_to_json(info) for info in self.jobs],
            "missing": list(self.missing),
        }


def queue_name(name: str) -> str:
    return validate_queue_name(name)


def queue_page(names: list[str], page: int, size: int = OVERVIEW_QUEUES) -> tuple[int, int, list[str]]:
    """(the page, how many pages, its queue names): a page past the last shows the last."""
    pages = max(1, -(-len(names) // size))
    page = min(page, pages)
    return page, pages, names[(page - 1) * size : page * size]


def page_number(raw: str | None) -> int:
    try:
        number = int(raw or 1)
    except ValueError:
        number = 0
    if number < 1:
        raise ConfigurationError(f"page {raw!r}: use a whole number from 1")
    return number


def job_page(app: TaskForge, queue: str, state: str, page: int, size: int = PAGE_SIZE) -> JobPage:
    if state not in STATES:
        raise ConfigurationError(f"state {state!r}: use one of {', '.join(STATES)}")
    queue = queue_name(queue)
    total, rows = app.broker.inspection.page(queue, state, (page - 1) * size, size)
    ids = [job_id for job_id, _ in rows]
    jobs, missing = [], []
    for job_id, fields in zip(ids, app.broker.inspection.read_many(queue, ids), strict=True):
        if fields is None:
            missing.append(job_id)
        else:
            jobs.append(job_info(job_id, queue, fields))
    return JobPage(queue, state, page, total, jobs, missing)


@dataclass(frozen=True)
class WorkflowView:
    """A workflow's page: its ``WorkflowInfo``, the step holding it up, and its ``on_failure`` step."""

    info: WorkflowInfo
    held: JobInfo | None
    on_failure: str | None  # the job id of the on_failure step, when it has one

    def to_dict(self) -> dict[str, Any]:
        """The ``taskforge workflow --json`` document: ``WorkflowInfo`` fields, steps as ``job --json``."""
        return workflow_to_json(self.info)


def workflow_view(app: TaskForge, workflow_id: str) -> WorkflowView:
    info = WorkflowHandle(app, workflow_id).info()  # WorkflowNotFound: a 404
    return WorkflowView(info, info.holding_step, info.on_failure)


@dataclass(frozen=True)
class WorkflowSummary:
    """One row of the workflows list: what its record says, without reading its steps."""

    id: str
    state: str
    steps: int
    first_task: str | None
    created_at: datetime | None
    finished_at: datetime | None
    error: str | None
    failed_step: str | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "state": self.state,
            "steps": self.steps,
            "first_task": self.first_task,
            "created_at": status.iso(self.created_at),
            "finished_at": status.iso(self.finished_at),
            "error": self.error,
            "failed_step": self.failed_step,
        }


@dataclass(frozen=True)
class WorkflowList:
    """The newest workflows of each state, and how many there are (ended ones: within the retention)."""

    counts: dict[str, int]
    workflows: dict[str, list[WorkflowSummary]]
    missing: list[str]  # ids still indexed whose record is gone (expired)

    def to_dict(self) -> dict[str, Any]:
        return {
            "counts": dict(self.counts),
            "workflows": {state: [w.to_dict() for w in rows] for state, rows in self.workflows.items()},
            "missing": list(self.missing),
        }


def workflow_limit(raw: str | None) -> int:
    text = raw or str(WORKFLOWS_SHOWN)
    if not text.isdigit() or not 1 <= int(text) <= MAX_WORKFLOWS:
        raise ConfigurationError(f"limit {text!r}: use a whole number from 1 to {MAX_WORKFLOWS}")
    return int(text)


def workflow_list(app: TaskForge, limit: int = WORKFLOWS_SHOWN) -> WorkflowList:
    ledger = app.broker.ledger
    listed: dict[str, list[WorkflowSummary]] = {}
    missing: list[str] = []
    for state in WORKFLOW_STATES:
        listed[state] = []
        for workflow_id in ledger.workflow_ids(state, limit):
            summary = workflow_summary(workflow_id, ledger.workflow_fields(workflow_id, SUMMARY_FIELDS))
            if summary is None:
                missing.append(workflow_id)
            else:
                listed[state].append(summary)
    return WorkflowList(ledger.workflow_counts(), listed, missing)


def workflow_summary(workflow_id: str, values: list[bytes | None]) -> WorkflowSummary | None:
    """None when the record is gone: an ended workflow stays indexed a little past its record."""
    raw = dict(zip(SUMMARY_FIELDS, values, strict=True))
    first = raw.pop(StepField.SPEC.at(0))
    text = {name: value.decode(errors="replace") if value else None for name, value in raw.items()}

    def field(name: WorkflowField) -> str | None:
        return text[name.value]

    if raw[WorkflowField.STATE.value] is None and raw[WorkflowField.STEPS.value] is None:
        return None
    failed = field(WorkflowField.FAILED_STEP)
    return WorkflowSummary(
        id=workflow_id,
        state=field(WorkflowField.STATE) or "running",
        steps=_number(field(WorkflowField.STEPS)) or 0,
        first_task=_task_of(first),
        created_at=ms_to_datetime(_number(field(WorkflowField.CREATED_AT))),
        finished_at=ms_to_datetime(_number(field(WorkflowField.FINISHED_AT))),
        error=field(WorkflowField.ERROR),
        failed_step=f"{workflow_id}.{failed}" if failed else None,
    )


def _task_of(spec: bytes | None) -> str | None:
    """The task of a step's spec; None when there is none, or junk."""
    try:
        return StepSpec.decode(spec).task if spec else None
    except (ValueError, CorruptPayload):
        return None


def _number(text: str | None) -> int | None:
    return int(text) if text and text.isascii() and text.isdigit() else None


def server_warnings(state: Any) -> list[str]:
    """The banner every page shows: how the Redis server's settings can lose jobs (``server_health.py``).

    Asked at most every ``SERVER_CHECK_EVERY`` seconds (a page refreshes every
    few); an unreachable server shows no banner here: the page itself says so.
    """
    cached: tuple[float, list[str]] | None = getattr(state, "server_warnings", None)
    now = time.monotonic()
    if cached is not None and cached[0] > now:
        return cached[1]
    again = SERVER_CHECK_EVERY
    try:
        summary, found = status.server_report(state.taskforge)
    except (redis.RedisError, TaskforgeError):
        summary, found = [], []
    if summary and summary[0].startswith(DENIED):
        again = SERVER_DENIED_AGAIN  # INFO denied (an ACL): each ask is an entry in its ACL LOG
    state.server_warnings = (now + again, found)
    return found
