"""What an operator looks at: queue counts, live workers, dead letters, as plain data.

``taskforge status`` and ``taskforge dead list`` format these; a dashboard can
serve them as they are. Every figure costs a bounded number of Redis calls,
whatever the size of the queues:

* pending, by priority: ZCOUNT over the score band of each priority
  (``(3 - priority) * 2**50 + seq``), O(log n);
* running, dead, scheduled + retrying: ZCARD;
* scheduled versus retrying: both wait in one zset, and only the job hash
  says which. Up to ``SAMPLE`` members are read: below that the split is
  exact, above it is an estimate from a random sample (``estimated: true``);
* recently finished: the ``jobs_done`` counter of each live worker (runs
  finished, whatever their outcome, since that worker started). Per-queue
  successes and failures per minute are ``Inspection.outcome_history`` (the
  dashboard's last hour), kept apart so this document's schema stays as is.

Jobs and workflows as JSON (``job_to_json``, ``workflow_to_json``) are
``job_json.py``'s, shared with the API's ``JobPage.to_dict()``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from .broker.connection import broker_errors, redact
from .broker.workers import live_workers
from .handle import job_info, known_queues
from .job import JobInfo, Priority, ms_to_datetime
from .job_json import job_to_json as job_to_json  # their home before job_json.py: code importing them here still runs
from .job_json import jsonable as jsonable
from .job_json import workflow_to_json as workflow_to_json

if TYPE_CHECKING:
    from .app import TaskForge

SAMPLE = 500
SCHEMA_VERSION = 1
PRIORITY_NAMES = [p.name.lower() for p in sorted(Priority, reverse=True)]  # critical first


def now_utc() -> datetime:
    return datetime.now(timezone.utc)


def as_utc(value: datetime | None) -> datetime | None:
    """``value`` on the UTC clock: every time this module hands out is labelled UTC, so it must be one.

    A cron schedule's next run comes back in the schedule's own zone (e.g.
    Europe/Paris); printed as it was, its wall time read as UTC was an hour off.
    """
    return value.astimezone(timezone.utc) if value is not None and value.tzinfo is not None else value


def iso(value: datetime | None) -> str | None:
    """ISO 8601 with a +00:00 offset, as ``status --json`` promises."""
    utc = as_utc(value)
    return utc.isoformat() if utc else None


@dataclass(frozen=True)
class QueueStatus:
    name: str
    pending_by_priority: dict[str, int]  # priority name -> count, critical first
    scheduled: int
    retrying: int
    running: int
    dead: int
    next_due: datetime | None
    estimated: bool = False  # scheduled/retrying split estimated from a sample
    expired_last_hour: int = 0  # jobs that reached their ``expires`` time unrun, in the last 60 minutes
    paused: bool = False  # app.pause(): workers start none of its jobs
    held: int = 0  # pending jobs held back by their task's per-key (or task-wide) limits
    deferred: int = 0  # jobs waiting for the jobs they depend on (depends_on)

    @property
    def pending(self) -> int:
        return sum(self.pending_by_priority.values())

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "pending": self.pending,
            "pending_by_priority": dict(self.pending_by_priority),
            "scheduled": self.scheduled,
            "retrying": self.retrying,
            "running": self.running,
            "dead": self.dead,
            "estimated": self.estimated,
            "next_due": iso(self.next_due),
            "expired_last_hour": self.expired_last_hour,
            "paused": self.paused,
            "held": self.held,
            "deferred": self.deferred,
        }


@dataclass(frozen=True)
class WorkerStatus:
    id: str
    host: str
    pid: int
    queues: list[str]
    concurrency: int
    jobs_done: int
    current: list[dict[str, Any]]  # {"id", "task", "queue", "started_at": datetime | None}
    started_at: datetime | None
    heartbeat: datetime | None
    clock_offset_ms: int = 0  # the worker's wall clock minus Redis's, at its last heartbeat

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "host": self.host,
            "pid": self.pid,
            "queues": list(self.queues),
            "concurrency": self.concurrency,
            "jobs_done": self.jobs_done,
            "current": [{**job, "started_at": iso(job["started_at"])} for job in self.current],
            "started_at": iso(self.started_at),
            "heartbeat": iso(self.heartbeat),
            "clock_offset_ms": self.clock_offset_ms,
        }


@dataclass(frozen=True)
class PeriodicStatus:
    task: str
    queue: str
    schedule: str
    next_run: datetime

    def to_dict(self) -> dict[str, Any]:
        return {"task": self.task, "queue": self.queue, "schedule": self.schedule, "next_run": iso(self.next_run)}


@dataclass(frozen=True)
class Status:
    broker: str  # the URL, password redacted
    queues: list[QueueStatus]
    workers: list[WorkerStatus]
    generated_at: datetime = field(default_factory=now_utc)
    periodic: list[PeriodicStatus] = field(default_factory=list)

    @property
    def next_due(self) -> datetime | None:
        due = [q.next_due for q in self.queues if q.next_due is not None]
        return min(due) if due else None

    @property
    def jobs_done(self) -> int:
        return sum(w.jobs_done for w in self.workers)

    def to_dict(self) -> dict[str, Any]:
        """The ``status --json`` document; see ``taskforge status --help`` for the schema."""
        return {
            "schema_version": SCHEMA_VERSION,
            "broker": self.broker,
            "generated_at": iso(self.generated_at),
            "queues": [q.to_dict() for q in self.queues],
            "workers": [w.to_dict() for w in self.workers],
            "jobs_done": self.jobs_done,
            "next_due": iso(self.next_due),
            "periodic": [p.to_dict() for p in self.periodic],
        }


def all_queues(app: TaskForge) -> list[str]:
    """The app's queues, then every other queue ever enqueued to or paused on this Redis."""
    return known_queues(app)


def queue_status(app: TaskForge, name: str, sample: int = SAMPLE, paused: bool | None = None) -> QueueStatus:
    """One queue's counts (``paused``: already read, for a page of queues; None: ask now)."""
    inspection = app.broker.inspection
    counts = inspection.counts(name)
    by_priority = inspection.pending_by_priority(name)
    total, states = inspection.scheduled_states(name, sample)
    retrying = states.count("retrying")
    estimated = len(states) < total
    if estimated:
        retrying = round(retrying * total / len(states))
    due = inspection.next_due_ms(name)
    return QueueStatus(
        name=name,
        pending_by_priority={p.name.lower(): by_priority.get(int(p), 0) for p in sorted(Priority, reverse=True)},
        scheduled=total - retrying,
        retrying=retrying,
        running=counts["running"],
        dead=counts["dead"],
        next_due=ms_to_datetime(due),
        estimated=estimated,
        expired_last_hour=inspection.expired_last_hour(name),
        paused=bool(app.broker.flow.paused([name])) if paused is None else paused,
        held=app.broker.flow.held(name),
        deferred=counts["deferred"],
    )


def queue_statuses(app: TaskForge, names: Sequence[str], paused: set[str]) -> list[QueueStatus]:
    """Every queue's counts; a queue with no job key is known empty from one pipelined probe
    (``broker/queue_probe.py``), so thousands of one-off queues cost a few round trips, not ten each."""
    from .broker.queue_probe import QueueProbe

    found = QueueProbe(app.broker.link).probe(names)
    no_jobs = {p.name.lower(): 0 for p in sorted(Priority, reverse=True)}
    return [
        queue_status(app, name, paused=name in paused)
        if found[name].jobs
        else QueueStatus(name, dict(no_jobs), 0, 0, 0, 0, None, False, found[name].expired, name in paused)
        for name in names
    ]


def worker_status(raw: dict[str, Any]) -> WorkerStatus:
    current = [
        {
            "id": job.get("id"),
            "task": job.get("task"),
            "queue": job.get("queue"),
            # What a worker wrote, through JSON: a number, or junk read as no time.
            "started_at": ms_to_datetime(started) if type(started := job.get("started_at")) is int else None,
        }
        for job in raw.get("current", [])
    ]
    return WorkerStatus(
        id=raw["id"],
        host=raw["host"],
        pid=raw["pid"],
        queues=list(raw["queues"]),
        concurrency=raw["concurrency"],
        jobs_done=raw["jobs_done"],
        current=current,
        started_at=ms_to_datetime(raw["started_at"] or None),
        heartbeat=ms_to_datetime(raw["heartbeat"] or None),
        clock_offset_ms=int(raw.get("clock_offset_ms", 0)),
    )


def workers(app: TaskForge) -> list[WorkerStatus]:
    """The workers whose heartbeat has not expired, on any queue of this Redis."""
    with broker_errors(app.broker.url):
        return [worker_status(raw) for raw in live_workers(app.broker.client)]


def status(app: TaskForge, queues: Sequence[str] | None = None) -> Status:
    """A snapshot of ``queues`` (default: ``all_queues``) and of the live workers."""
    names = list(queues) if queues is not None else all_queues(app)
    now = now_utc()
    paused = app.broker.flow.paused(names)
    return Status(
        broker=redact(app.url),
        queues=queue_statuses(app, names, paused),
        workers=workers(app),
        periodic=[
            PeriodicStatus(s.task.name, s.task.queue, s.describe(), s.following(now).astimezone(timezone.utc))
            for s in app.schedules
        ],
    )


def dead_jobs(app: TaskForge, queues: Sequence[str] | None = None, limit: int = 20) -> list[JobInfo]:
    """The ``limit`` most recent dead jobs across ``queues``, newest first."""
    names = list(queues) if queues is not None else all_queues(app)
    newest: list[tuple[int, str, str]] = []
    for name in names:
        newest += [(died, name, job_id) for job_id, died in app.broker.inspection.dead_ids(name, limit)]
    newest = sorted(newest, reverse=True)[:limit]
    infos: list[JobInfo] = []
    for name in dict.fromkeys(q for _, q, _ in newest):
        ids = [job_id for _, q, job_id in newest if q == name]
        for job_id, fields in zip(ids, app.broker.inspection.read_many(name, ids), strict=True):
            if fields is not None:
                infos.append(job_info(job_id, name, fields))
    order = {job_id: i for i, (_, _, job_id) in enumerate(newest)}
    return sorted(infos, key=lambda info: order[info.id])


def server_report(app: TaskForge) -> tuple[list[str], list[str]]:
    """The Redis server's settings in one line per server, and how they can lose jobs (``server_health.py``)."""
    from .broker import server_health

    return server_health.report(app.broker.client, app.url, app.durability == "replicated")
