"""Run jobs in the calling process: ``app.drain()``, for tests and eager mode.

The same runner a worker uses (hooks, middleware, retries, dead letters,
results), without processes, leases renewal or timeouts.

Jobs of ``async def`` tasks run through the worker's async run path
(``worker/aio_run.py``): ``drain()`` runs each to completion with
``asyncio.run`` (or, called from a thread whose loop is running, as in eager
mode inside async code, on a loop of a short-lived thread, which it waits
for); ``adrain()`` runs the same passes in the loop's default executor,
so the loop stays free for the caller's other coroutines, and sends each
async job back to the caller's loop, where it is awaited.

This module is the one door from the API to worker code: ``app.drain()``
imports it when first used (the testing kit, with eager mode's switch, at
once), and it loads the worker's runner only when a drain starts, so a producer that never drains never loads
``taskforge.worker`` (docs/architecture.md).
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import threading
from collections.abc import Callable
from datetime import timedelta
from functools import partial
from typing import TYPE_CHECKING, Any, cast

from . import joins
from .broker import dependencies
from .handle import JobHandle

if TYPE_CHECKING:
    from .app import TaskForge
    from .broker.queue import Claim
    from .job import JobInfo

DRAIN_LEASE_MS = 3_600_000
# Passes that claimed nothing but were told to try again (corrupt jobs dead-lettered, a
# due job just promoted) before a drain gives up: a bound, so it can never spin forever.
MAX_RETRIES = 1000


def drain(app: TaskForge, *, advance: timedelta | float | None = None, max_jobs: int = 100_000) -> list[JobInfo]:
    from .worker.runner import run_claim  # loaded by the first drain, not by the pytest plugin

    def run(claim: Claim) -> None:
        if is_async(app, claim):
            run_async(app, claim)
        else:
            run_claim(app, claim, reraise_interrupts=True)

    return passes(app, advance, max_jobs, run)


async def adrain(app: TaskForge, *, advance: timedelta | float | None = None, max_jobs: int = 100_000) -> list[JobInfo]:
    """``drain()`` from inside a running loop: the passes in the loop's default executor, so the
    loop stays free, and each async job sent back to the loop and awaited there."""
    from .worker.aio_run import arun_claim
    from .worker.runner import run_claim

    loop = asyncio.get_running_loop()

    def offload(call: Callable[[], Any]) -> asyncio.Future[Any]:
        return loop.run_in_executor(None, call)

    def run(claim: Claim) -> None:  # on the executor's thread
        if is_async(app, claim):
            asyncio.run_coroutine_threadsafe(arun_claim(app, claim, offload), loop).result()
        else:
            run_claim(app, claim)

    return cast("list[JobInfo]", await offload(partial(passes, app, advance, max_jobs, run)))


def passes(
    app: TaskForge, advance: timedelta | float | None, max_jobs: int, run: Callable[[Claim], None]
) -> list[JobInfo]:
    """A drain, written once for ``drain`` and ``adrain``: pass over every queue, running what each
    claims with ``run``, until a pass claims nothing (or ``max_jobs`` ran).

    While it runs, a task's join on a job of ``app`` runs more passes of the same
    drain until that job has ended (``taskforge/joins.py``); what they run is
    reported with the rest, in the order it ran.
    """
    seconds = advance.total_seconds() if isinstance(advance, timedelta) else advance
    ran: list[JobInfo] = []

    def until(done: Callable[[], bool]) -> None:
        sweep(app, None, max_jobs, run, ran, done)

    token = joins.draining(joins.InProcess(app, until))
    try:
        sweep(app, seconds, max_jobs, run, ran, lambda: False)
    finally:
        joins.undrain(token)
    return ran


def sweep(
    app: TaskForge,
    seconds: float | None,
    max_jobs: int,
    run: Callable[[Claim], None],
    ran: list[JobInfo],
    done: Callable[[], bool],
) -> None:
    """Claim and run the app's ready jobs one at a time, appending each to ``ran``, until a pass claims
    nothing, ``max_jobs`` ran, or ``done()`` (asked before each claim: a claimed job is always run)."""
    broker = app.broker
    retries = 0
    while len(ran) < max_jobs and not done():
        # Read again each pass: a workflow's next step may be on a queue not seen before.
        queues = list(dict.fromkeys([*app.queues(), *broker.jobs.queues()]))
        claimed = again = False
        # Ends of jobs others wait for (depends_on), as a worker's reconciler delivers them.
        broker.drive(dependencies.deliver_boxes(queues, broker.settings.retention_ms))
        for queue in queues:
            if done():
                return
            if seconds:
                broker.claims.fast_forward(queue, seconds)
            claims, wait = broker.claims.dequeue(queue, DRAIN_LEASE_MS)
            again = again or wait == 0.0  # it dead-lettered a corrupt job: more may be ready
            for claim in claims:
                run(claim)
                ran.append(JobHandle(app, claim.id, queue).info())
                claimed = True
        if not claimed and (not again or (retries := retries + 1) > MAX_RETRIES):
            return


def is_async(app: TaskForge, claim: Claim) -> bool:
    task = app.tasks.get(claim.task)
    return task is not None and inspect.iscoroutinefunction(task.func)


def run_async(app: TaskForge, claim: Claim) -> None:
    """Run one async job to completion from sync code, on a loop of its own."""
    from .worker.aio_run import arun_claim, direct

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        asyncio.run(arun_claim(app, claim, direct))
        return
    # This thread's loop is busy running our caller: a second loop needs a thread of its own.
    failure: list[BaseException] = []

    def run() -> None:
        try:
            asyncio.run(arun_claim(app, claim, direct))
        except BaseException as exc:  # raised again in the caller's thread
            failure.append(exc)

    # In this context, so that a join inside the job sees the drain it runs in (``joins.py``).
    thread = threading.Thread(target=contextvars.copy_context().run, args=(run,), name="taskforge-drain-loop")
    thread.start()
    thread.join()
    if failure:
        raise failure[0]


class EagerDrain:
    """Eager mode's after-enqueue callback: drain ``app`` right after each job is stored.

    A job that enqueues another drains again from inside its own run, so
    work runs depth-first, in the caller's thread, as the testing kit says.
    A class of its own so that ``is_eager`` finds it among the app's other
    callbacks: the app keeps no state for a mode only tests use.
    """

    def __init__(self, app: TaskForge) -> None:
        self.app = app

    def __call__(self, handle: JobHandle[Any]) -> object:
        return drain(self.app)


def is_eager(app: TaskForge) -> bool:
    """Whether ``app`` is in eager mode: its ``after_enqueue`` holds the eager callback."""
    return any(isinstance(callback, EagerDrain) for callback in app.after_enqueue)


def set_eager(app: TaskForge, on: bool) -> None:
    """Switch eager mode on (every ``delay()`` drains before it returns) or off; twice on is once on."""
    installed = [callback for callback in app.after_enqueue if isinstance(callback, EagerDrain)]
    if on and not installed:
        app.after_enqueue.append(EagerDrain(app))
    elif not on:
        for callback in installed:
            app.after_enqueue.remove(callback)
