"""Acting on every job a search finds: ``taskforge jobs --retry/--cancel/--delete`` and the dashboard's bulk actions.

A bulk action applies to every job that matches when it is asked, not one
page: the search runs to its end, newest first, over the jobs created before
the call (``search.every_match``), kept to the states the action applies to
(a dead job to retry; a pending, scheduled or retrying one to cancel; a
succeeded, dead or cancelled one to delete), and each slice (50 jobs to
retry, 100 otherwise) goes through the same scripts as one job does: a
retried dead job is exactly what ``taskforge dead retry`` makes it (a step
of a dead workflow resumes its workflow), a cancelled one what
``JobHandle.cancel()`` makes it (its final-transition listeners hear of it).
So Redis is never busy for more than a few milliseconds at a time, an
interrupted action leaves every job either done or untouched, and running
it again changes only what is left (a job already retried is no longer
dead).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from .broker.cleanup import PURGE_SLICE, RETRY_SLICE
from .finals import FinalTransition
from .job import JobState
from .search import Query, every_match
from .workflows.resume import retry_dead

if TYPE_CHECKING:
    from .app import TaskForge

ACTIONS: dict[str, frozenset[JobState]] = {
    "retry": frozenset({JobState.DEAD}),
    "cancel": frozenset({JobState.PENDING, JobState.SCHEDULED, JobState.RETRYING}),
    "delete": frozenset({JobState.SUCCEEDED, JobState.DEAD, JobState.CANCELLED}),
}
DONE = {"retry": "retried", "cancel": "cancelled", "delete": "deleted"}


def applicable(q: Query, action: str) -> Query | None:
    """``q`` kept to the states ``action`` applies to; None when it leaves none (``--state succeeded --retry``)."""
    if action not in ACTIONS:
        raise ValueError(f"unknown bulk action {action!r}: one of {', '.join(ACTIONS)}")
    return q.narrowed(ACTIONS[action])


def count(app: TaskForge, q: Query, action: str, at_most: int | None = None) -> int:
    """How many jobs ``action`` would change now (what a confirmation shows).

    With ``at_most``, counting stops as soon as the count passes it (the
    answer is then more than ``at_most``, not the total): a page that asks
    before acting does bounded work however many jobs match.
    """
    kept = applicable(q, action)
    total = 0
    for found in every_match(app, kept, PURGE_SLICE) if kept is not None else ():
        total += len(found)
        if at_most is not None and total > at_most:
            break
    return total


def apply(app: TaskForge, q: Query, action: str, progress: Callable[[int], None] | None = None) -> int:
    """Do ``action`` to every job matching ``q`` created before this call, a slice at a time: how many changed.

    ``progress`` hears the running total after each slice.
    """
    kept = applicable(q, action)
    if kept is None:
        return 0
    changed = 0
    for found in every_match(app, kept, RETRY_SLICE if action == "retry" else PURGE_SLICE):
        by_queue: dict[str, list[str]] = {}
        for f in found:
            by_queue.setdefault(f.queue, []).append(f.id)
        for queue, ids in by_queue.items():
            changed += act(app, action, queue, ids)
        if progress is not None:
            progress(changed)
    return changed


def act(app: TaskForge, action: str, queue: str, job_ids: list[str]) -> int:
    """One slice of one queue through the action's scripts: how many of ``job_ids`` changed."""
    broker = app.broker
    if action == "retry":
        return len(retry_dead(broker, queue, job_ids))
    if action == "delete":
        return broker.cleanup.delete(queue, job_ids)
    outcomes = broker.cleanup.cancel_each(queue, job_ids)
    cancelled = [job_id for job_id, outcome in zip(job_ids, outcomes, strict=True) if outcome == 1]
    for job_id in cancelled:
        app.finals.ended(broker, FinalTransition(queue, job_id, "cancelled"))
    return len(cancelled)
