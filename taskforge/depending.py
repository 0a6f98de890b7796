"""What ``apply_async(..., depends_on=...)`` is given, read once: the ids of the jobs to wait for.

The storing itself is ``broker/dependencies.py`` (one plan for sync and
async); this only checks the argument, so a mistake is an error at the
call, and finds each parent's queue: a dependency on a job that does not
exist (never sent, or past its retention) raises ``JobNotFound`` before
anything is stored.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar

from .broker import dependencies
from .broker.dependencies import Parent
from .broker.plan import Plan
from .building import build_job
from .errors import ConfigurationError
from .handle import JobHandle, async_access, locating, state_of

if TYPE_CHECKING:
    from .broker.record import NewJob
    from .protocols import BrokerAccess
    from .task import Task

R = TypeVar("R")

DependsOn: TypeAlias = "JobHandle[Any] | str | Sequence[JobHandle[Any] | str]"


@dataclass(frozen=True)
class Parents:
    """The jobs one call depends on, and whether it runs when one of them does not succeed."""

    ids: tuple[str, ...]
    allow_failure: bool

    @classmethod
    def of(cls, task: str, depends_on: object, allow_failure: bool, timing: dict[str, int]) -> Parents:
        if timing:
            raise ConfigurationError(f"{task}: depends_on waits for its parents; give no countdown or eta")
        items = [depends_on] if isinstance(depends_on, (str, JobHandle)) else depends_on
        if not isinstance(items, (list, tuple)) or not items:
            raise ConfigurationError(f"{task}: depends_on takes a JobHandle or a job id, or a list of them")
        ids = []
        for item in items:
            job_id = item.id if isinstance(item, JobHandle) else item
            if not isinstance(job_id, str) or not job_id:
                raise ConfigurationError(f"{task}: depends_on={item!r}: give a JobHandle or its id")
            ids.append(job_id)
        return cls(tuple(dict.fromkeys(ids)), bool(allow_failure))

    def located(self, own: list[str]) -> Plan[list[Parent]]:
        """(queue, id) of each parent; ``JobNotFound`` for one no queue holds."""
        found = []
        for job_id in self.ids:
            found.append(((yield from locating(own, job_id)), job_id))
        return found

    def job(self, task: Task[Any, Any], call: tuple[Any, ...], kwargs: dict[str, Any], found: list[Parent]) -> NewJob:
        """The record of a job that will wait: due far ahead until it is held (``broker/dependencies.py``),
        with what it waits for."""
        job = build_job(task, call, kwargs, due_ms=dependencies.parked_due_ms())
        return replace(job, fields={**(job.fields or {}), **dependencies.fields(found, self.allow_failure)})


def enqueue_after(task: Task[Any, R], parents: Parents, args: tuple[Any, ...], kwargs: dict[str, Any]) -> JobHandle[R]:
    """A job that waits for ``parents``: they are found (or ``JobNotFound``), it is stored, then held."""
    broker = task.app.broker
    found = broker.drive(parents.located(task.app.queues()))
    [job_id] = task._store([parents.job(task, args, kwargs, found)], resend=task.options.job_id is not None)
    broker.drive(dependencies.hold(task.queue, job_id, found, broker.settings.retention_ms))
    return task._stored(job_id)


async def aenqueue_after(
    task: Task[Any, R], parents: Parents, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> JobHandle[R]:
    """``enqueue_after()``, awaited: never blocks the event loop."""
    broker = async_access(task.app).async_broker()
    found = await broker.drive(parents.located(task.app.queues()))
    [job_id] = await task._astore([parents.job(task, args, kwargs, found)], resend=task.options.job_id is not None)
    await broker.drive(dependencies.hold(task.queue, job_id, found, broker.settings.retention_ms))
    return task._stored(job_id)


def waits_for(app: BrokerAccess, queue: str, job_id: str) -> list[tuple[str, str, str]]:
    """What a job given ``depends_on`` waits (or waited) for: (queue, id, state) of each parent,
    state ``gone`` for a record past its retention; [] for a job given none. ``taskforge job``
    and the dashboard's job page show it."""
    fields = app.broker.jobs.read(queue, job_id) or {}
    parents = dependencies.parents_of(fields.get(b"parents"))
    found = [(parent_queue, parent, app.broker.jobs.read(parent_queue, parent)) for parent_queue, parent in parents]
    return [(q, parent, state_of(record).value if record else "gone") for q, parent, record in found]
