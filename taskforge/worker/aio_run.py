"""Run one claimed job of an ``async def`` task: await it inside the middleware, then record it.

The async twin of ``runner.run_claim``, sharing everything after the call:
the outcome is recorded by ``runner.record_outcome`` (fencing, retries,
dead letters, the final-transition seam, hooks), so a job's fate is decided in one
place whichever way its task was written.

Recording goes through ``offload``: in a worker child that is a small pool
of threads using the app's ordinary (sync) broker, so the event loop never
waits on Redis, and a Redis outage (recording retries until Redis answers)
stalls the recording threads, never the other async jobs. ``app.drain()``
passes a direct call, ``app.adrain()`` the loop's default executor.

The task runs as an asyncio task of its own, created in a context where
``current_job()`` names its job: every async job has its own context, so
100 jobs on one loop each see their own. Only that inner task is ever
cancelled (a timeout, an abort), never the code that records the outcome.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar

from ..broker.queue import Claim
from ..context import Slept, enter, leave
from ..errors import SoftTimeout
from ..finals import FinalTransition
from ..job import FailureKind
from .outage import Outage
from .runner import Outcome, RunContext, claim_info, failed, record, record_outcome, retry_delay

T = TypeVar("T")
Offload = Callable[[Callable[[], T]], Awaitable[T]]

TIMEOUT = "timeout"
ABORT = "abort"
SOFT = "soft"  # past its soft timeout: cancelled, and the task's own code decides the outcome


@dataclass
class Flight:
    """One async job on the loop: its claim, its slot id, and why it was cancelled, if it was."""

    claim: Claim
    slot: int
    started: float = field(default_factory=time.monotonic)
    user: asyncio.Task[Any] | None = None  # the task's own code, the only part ever cancelled
    reason: str | None = None  # TIMEOUT or ABORT, once the supervisor asked
    soft: bool = False  # cancelled for its soft timeout (the task may have caught it)


async def direct(call: Callable[[], T]) -> T:
    """An ``Offload`` that calls at once, for ``app.drain()``: its loop runs nothing else."""
    return call()


class Escaped(Exception):  # noqa: N818 - a carrier, never recorded itself
    """Carries a ``SystemExit`` or ``KeyboardInterrupt`` a task raised out of its asyncio task.

    asyncio re-raises those two out of the event loop, which would end the
    child and every job on it; carried as an ``Exception``, the job fails
    with the original error (its class path and traceback) like any other.
    """

    def __init__(self, original: BaseException) -> None:
        super().__init__(str(original))
        self.original = original


async def guarded(claim: Claim, awaitable: Awaitable[Any]) -> Any:
    """Await the task; the loop watchdog finds this frame on the stack to name the job blocking the loop."""
    try:
        return await awaitable
    except (SystemExit, KeyboardInterrupt) as exc:
        raise Escaped(exc) from None


def aborted(context: RunContext, claim: Claim, started: float, outage: Outage) -> Outcome:
    """Record an aborted async job cancelled, as the supervisor records a sync one it killed."""
    record(context.broker.claims.abandon, claim.queue, claim.id, claim.token, outage=outage)
    if claim.workflow or context.finals.every:  # the record says why: the listeners read it there
        context.finals.ended(context.broker, FinalTransition(claim.queue, claim.id, "cancelled"))
    return Outcome("cancelled", time.monotonic() - started, "aborted")


async def arun_claim(
    context: RunContext,
    claim: Claim,
    offload: Offload[Any],
    outage: Outage | None = None,
    flight: Flight | None = None,
) -> Outcome:
    """Await ``claim``'s task inside the app's middleware and record the outcome through ``offload``.

    ``flight``, in a worker, is how the supervisor's cancel request (a
    timeout, an abort) reaches the run: its ``reason`` decides how a
    cancelled run is recorded, whatever the task did with the cancellation.
    """
    started = time.monotonic()
    outage = outage or Outage(context.broker.url)
    info = claim_info(claim)
    hooks = context.hooks
    task = context.tasks[claim.task]
    if hooks.handlers["job_started"]:
        await offload(partial(hooks.emit, "job_started", info))
    current = enter(claim, context.broker.claims, context.broker.steps)
    try:
        # Created here, the task's context is a copy of this one: current_job() names this job.
        run = guarded(claim, hooks.arun(info, lambda: task.func(*claim.args, **claim.kwargs)))
        user = asyncio.ensure_future(run)
    finally:
        leave(current)
    if flight is not None:
        flight.user = user
        if flight.reason is not None:  # asked before the task existed
            user.cancel()
    await asyncio.wait([user])
    reason = flight.reason if flight is not None else None
    if reason == ABORT:
        outcome: Outcome = await offload(partial(aborted, context, claim, started, outage))
        return outcome
    if reason == TIMEOUT:
        text = f"TimeoutError: the job ran longer than its timeout of {claim.timeout or 0:g} s and was cancelled"
        failure = (text, "", retry_delay(context, claim.task, claim.attempts))
        outcome = await offload(partial(failed, context, claim, info, failure, started, outage, FailureKind.TIMEOUT))
        return outcome
    if user.cancelled() and flight is not None and flight.soft:
        error: BaseException | None = SoftTimeout("the job ran past its soft timeout and was cancelled")
        value = None
    elif user.cancelled():  # cancelled by the task's own code, not by us: a failure like any other
        error = asyncio.CancelledError("the task's coroutine was cancelled")
        value = None
    else:
        error = user.exception()
        value = None if error is not None else user.result()
        if isinstance(error, Escaped):
            error = error.original
        if isinstance(error, Slept):  # the job is scheduled again already (``CurrentJob.asleep``)
            return Outcome("slept", time.monotonic() - started)
    outcome = await offload(partial(record_outcome, context, claim, info, started, outage, value=value, error=error))
    return outcome
