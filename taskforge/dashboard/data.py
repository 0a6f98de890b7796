"""What the dashboard shows, as plain data: built on ``taskforge.inspect``, never reading a whole queue.

The overview is ``inspect.status`` (the ``status --json`` document) plus the
last hour of per-minute outcome counts; job lists are pages of one Redis set
(``Broker.page``), so a queue of a million jobs costs what a queue of fifty
does.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from .. import inspect
from ..broker.keys import validate_queue_name
from ..errors import ConfigurationError
from ..handle import job_info
from ..job import JobInfo, ms_to_datetime

if TYPE_CHECKING:
    from ..app import TaskForge

PAGE_SIZE = 50
MINUTES = 60
STATES = ("pending", "scheduled", "running", "dead")


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
            "first_minute": inspect.iso(self.first_minute),
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
    first, rows = app.broker.outcome_history(queues, MINUTES)
    return History(ms_to_datetime(first) or inspect.now_utc(), rows)


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
            "jobs": [inspect.job_to_json(info) for info in self.jobs],
            "missing": list(self.missing),
        }


def queue_name(name: str) -> str:
    return validate_queue_name(name)


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
    total, rows = app.broker.page(queue, state, (page - 1) * size, size)
    ids = [job_id for job_id, _ in rows]
    jobs, missing = [], []
    for job_id, fields in zip(ids, app.broker.read_many(queue, ids), strict=True):
        if fields is None:
            missing.append(job_id)
        else:
            jobs.append(job_info(job_id, queue, fields))
    return JobPage(queue, state, page, total, jobs, missing)
