"""The job mix: what the producer enqueues and what each kind should end as.

Shared by the producer (what to send) and the analysis (what to expect), so
the two can never disagree about a kind's design.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

APP_MODULE = "chaosapp"
PATIENT = 12  # chaosapp.PATIENT


@dataclass(frozen=True)
class Kind:
    name: str
    weight: float
    queue: str = "default"
    max_attempts: int = PATIENT
    final: str = "succeeded"

    @property
    def task(self) -> str:
        return f"{APP_MODULE}.{self.name}"

    def designed_runs(self, args: tuple[Any, ...]) -> int:
        """How many runs the job needs when nothing goes wrong."""
        if self.name in ("flaky", "polite"):
            return int(args[1]) + 1
        if self.name == "crash_once":
            return 2
        if self.name == "doomed":
            return self.max_attempts
        if self.name == "durable":
            return 2 if args[1] else 1  # a durable sleep ends the first run
        return 1


KINDS = {
    k.name: k
    for k in (
        Kind("quick", 0.55),
        Kind("slow", 0.08),
        Kind("long", 0.008),
        Kind("flaky", 0.10),
        Kind("polite", 0.05),
        Kind("doomed", 0.04, max_attempts=3, final="dead"),
        Kind("crash_once", 0.02),
        Kind("bulk", 0.16, queue="bulk"),
        Kind("keyed", 0.08),
        Kind("turns", 0.06),
        Kind("screen_a", 0.03),
        Kind("screen_b", 0.03),
        Kind("durable", 0.03),
    )
}

PRIORITIES = ("low", "normal", "high", "critical")
ACCOUNTS = ("acct-0", "acct-1", "acct-2", "acct-3")  # the keys of the keyed jobs: few, so their cap binds
KEY_CAP = 2  # chaosapp.KEY_CAP
SHARED = ("screen_a", "screen_b")  # the kinds whose tasks share one named limit (app.limit), and its cap:
SHARED_CAP = 2  # chaosapp.SHARED_CAP
CUSTOMERS = tuple(f"cust-{n}" for n in range(6))  # the keys of the turns jobs (a task without limits)
# The share of jobs sent to a kind's async twin (chaosapp.aio_<name>), at least.
ASYNC_SHARE = 0.3


@dataclass
class JobPlan:
    """One logical job; a failed enqueue call is retried with a fresh token."""

    index: int
    kind: str
    extra: tuple[Any, ...] = ()  # task arguments after the token
    priority: str | None = None  # None: the task's own
    delay: float = 0.0  # apply_in seconds; 0: now
    by_name: bool = False  # app.send(name): the worker's definition supplies the options
    batch: int = 0  # > 0: sent with delay_many in batch number `batch`
    asynchronous: bool = False  # sent to the kind's async twin, run on a child's event loop
    tokens: list[int] = field(default_factory=list)  # every token tried, in order
    job_id: str | None = None  # set once an enqueue call returned
    token: int | None = None  # the token of the acknowledged call
    parents: tuple[int, ...] = ()  # depends_on: the indexes of earlier jobs it waits for (dependencies.py)
    allow_failure: bool = False  # it runs even when one of them does not succeed

    def args(self, token: int) -> tuple[Any, ...]:
        return (token, *self.extra)

    @property
    def task(self) -> str:
        return f"{APP_MODULE}.aio_{self.kind}" if self.asynchronous else KINDS[self.kind].task


def plan_jobs(rng: random.Random, n: int) -> list[JobPlan]:
    names = list(KINDS)
    weights = [KINDS[k].weight for k in names]
    jobs: list[JobPlan] = []
    batch = 0
    while len(jobs) < n:
        kind = rng.choices(names, weights)[0]
        extra: tuple[Any, ...] = ()
        if kind == "slow":
            extra = (round(rng.uniform(0.2, 1.0), 3),)
        elif kind == "long":
            extra = (round(rng.uniform(2.5, 4.0), 3),)
        elif kind in ("flaky", "polite"):
            extra = (rng.choice((1, 1, 2)),)
        elif kind == "keyed":
            extra = (rng.choice(ACCOUNTS), round(rng.uniform(0.05, 0.4), 3))
        elif kind in SHARED:
            extra = (round(rng.uniform(0.05, 0.3), 3),)
        elif kind == "turns":
            extra = (rng.choice(CUSTOMERS),)
        elif kind == "durable":
            extra = (rng.choice((0, round(rng.uniform(0.2, 1.5), 3))),)
        priority = rng.choice(PRIORITIES) if rng.random() < 0.35 else None
        delay = round(rng.uniform(0.5, 3.0), 3) if rng.random() < 0.10 else 0.0
        if kind == "quick" and priority is None and not delay and rng.random() < 0.15:
            jobs.append(JobPlan(len(jobs), kind, by_name=True))
            continue
        if not delay and rng.random() < 0.04:  # a delay_many call of 2-5 jobs alike
            batch += 1
            for _ in range(min(rng.randint(2, 5), n - len(jobs))):
                jobs.append(JobPlan(len(jobs), kind, extra, priority, batch=batch))
            continue
        jobs.append(JobPlan(len(jobs), kind, extra, priority, delay))
    make_some_async(rng, jobs)
    from .dependencies import plan_dependencies  # it reads this module's kinds

    plan_dependencies(rng, jobs)
    return jobs


def make_some_async(rng: random.Random, jobs: list[JobPlan]) -> None:
    """Send ASYNC_SHARE of the jobs, whole batches at a time, to the async twins."""
    batches: dict[int, list[JobPlan]] = {}
    for job in jobs:
        batches.setdefault(job.batch or -1 - job.index, []).append(job)
    units = list(batches.values())
    rng.shuffle(units)
    wanted, done = ASYNC_SHARE * len(jobs), 0
    for unit in units:
        if done >= wanted:
            break
        for job in unit:
            job.asynchronous = True
        done += len(unit)
