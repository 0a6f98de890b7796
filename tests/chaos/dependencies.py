"""Jobs that depend on jobs sent before them (``apply_async(..., depends_on=...)``), through the storm.

A share of the quick jobs are sent with one or two earlier jobs as parents,
some with ``allow_failure=True``. Parents are any earlier job, of either
queue, doomed ones and dependents included, so that a dependent of a job
that ends dead or cancelled is planned too. The invariant, checked once
the workers drained: every dependent ran (exactly once as far as the
faults allow, which ``analysis.py`` judges for every job alike) and only
after each of its parents ended as it had to, or ended cancelled, never
run, because one of them did not succeed.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from .analysis import Run
from .jobs import KINDS, JobPlan

SHARE = 0.3  # of the plain quick jobs, made dependents
DOOMED_PARENT = 0.3  # of the dependents, given a doomed job as a parent (when one was sent before)


def plan_dependencies(rng: random.Random, jobs: list[JobPlan]) -> None:
    """Make some plain quick jobs (sync, sent alone, now) dependents of one or two earlier jobs."""
    for job in jobs[10:]:
        plain = job.kind == "quick" and not (job.batch or job.by_name or job.delay or job.asynchronous)
        if plain and rng.random() < SHARE:
            parents = set(rng.sample(range(job.index), rng.choice((1, 1, 2))))
            doomed = [earlier.index for earlier in jobs[: job.index] if earlier.kind == "doomed"]
            if doomed and rng.random() < DOOMED_PARENT:
                parents.add(rng.choice(doomed))
            job.parents = tuple(sorted(parents))
            job.allow_failure = rng.random() < 0.25


def designed_final(job: JobPlan, jobs: list[JobPlan]) -> str:
    """How ``job`` must end: its kind's way, or cancelled when a parent does not succeed (no allow_failure)."""
    if job.parents and not job.allow_failure:
        if any(designed_final(jobs[p], jobs) != "succeeded" for p in job.parents):
            return "cancelled"
    return KINDS[job.kind].final


def check_dependencies(jobs: list[JobPlan], runs: dict[int, list[Run]], problem: Callable[[str], None]) -> int:
    """Each acknowledged dependent ran only after its parents ended, or never when it ended cancelled;
    returns how many dependents were checked."""
    checked = 0
    for job in jobs:
        if not job.parents or job.token is None:
            continue
        checked += 1
        mine = runs.get(job.token, [])
        if designed_final(job, jobs) == "cancelled":
            if mine:
                problem(f"dependent {job.job_id} ran although a parent of it did not succeed: {len(mine)} runs")
            continue
        if not mine:
            continue  # check_outcomes reports a job that succeeded with no side effect
        first = min(run.start for run in mine)
        for index in job.parents:
            parent = jobs[index]
            ends = [run.end for run in runs.get(parent.token or -1, []) if run.end is not None]
            if ends and first < max(ends):
                problem(
                    f"dependent {job.job_id} started at {first:.3f}, before its parent {parent.job_id} "
                    f"({parent.kind}) ended at {max(ends):.3f}"
                )
    return checked
