"""Run one claimed job: look up, call, catch, record.

Recording is retried through Redis outages, so the outcome of a job that
finished while Redis was away is written once Redis is back (or, if the
lease ran out meanwhile and another worker took the job, fenced off).

The runner needs six things from an app (its name, task registry, hooks
and middleware, broker, size limit, and the listeners of its final
transitions), spelled out as ``RunContext``: a
worker child builds an ``AppContext`` once, ``app.drain()`` passes the app
itself, and neither side depends on everything else a ``TaskForge`` carries.
"""

from __future__ import annotations

import logging
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol

import redis

from ..broker.queue import Claim
from ..context import Slept, enter, leave
from ..errors import CorruptQueue, Retry, SerializationError, UnknownTask, class_path, error_type_of_kind
from ..finals import FinalTransition
from ..job import FailureKind, JobInfo, JobState, Priority
from ..serialization import dumps_result
from . import soft
from .lost_acks import own_outcome, recorded_success, refusal
from .outage import OUTAGE_ERRORS, Outage
from .retry_filters import not_retried

if TYPE_CHECKING:
    from ..broker.roles import BrokerRoles
    from ..finals import Finals
    from ..hooks import Hooks
    from ..task import Task
    from .foreign import Elsewhere

log = logging.getLogger("taskforge.worker")

RECORD_BACKOFF_CAP = 5.0
RECORD_ATTEMPTS_ON_ERROR = 3


class RunContext(Protocol):
    """What running a job reads from its app; a ``TaskForge`` has all of it."""

    @property
    def name(self) -> str: ...

    @property
    def tasks(self) -> Mapping[str, Task[Any, Any]]: ...

    @property
    def hooks(self) -> Hooks: ...

    @property
    def broker(self) -> BrokerRoles: ...

    @property
    def max_job_size(self) -> int: ...

    @property
    def finals(self) -> Finals: ...


@dataclass(frozen=True)
class AppContext:
    """A ``RunContext`` read off a loaded app once, as a worker child does before its first job."""

    name: str
    tasks: Mapping[str, Task[Any, Any]]
    hooks: Hooks
    broker: BrokerRoles
    max_job_size: int
    finals: Finals  # who hears of a final transition (``finals.py``); a child's has its courier
    elsewhere: Elsewhere | None = None  # which live workers serve the tasks this app does not know

    @classmethod
    def of(cls, app: RunContext) -> AppContext:
        return cls(app.name, app.tasks, app.hooks, app.broker, app.max_job_size, app.finals)


@dataclass(frozen=True)
class Outcome:
    """What happened to one run; ``state`` is what the queue said after recording."""

    state: str | None  # succeeded | retrying | dead | fenced | None (not recorded: lease will expire)
    duration: float
    error: str | None = None
    retry_in: float | None = None  # the backoff asked of the queue, when the run failed
    # When the caller asked to chain: what claiming the next job returned.
    next: tuple[list[Claim], float | None] | None = None


Defer = Callable[[Claim, bytes], None]  # takes a success (the claim, its result) to record later


@dataclass(frozen=True)
class Chain:
    """Ask run_claim to claim the next job in the same call that records success."""

    lease_ms: int
    token: str


def retry_delay(context: RunContext, task_name: str, attempt: int, requested: float | None = None) -> float:
    """Seconds before the next attempt: what the task asked for, else its backoff policy."""
    if requested is not None:
        return requested
    task = context.tasks.get(task_name)
    if task is None:
        return 1.0
    return max(0.0, float(task.backoff(attempt)))


def record(call: Any, *args: Any, outage: Outage, stop: Any = None) -> Any:
    """Call a broker method until Redis answers; ``stop()`` true gives up (returns None).

    An outage is waited out (and said through ``outage``, once, not per
    try). Any other Redis error (the job's record was overwritten by
    something else, say) is tried a few times and then given up: the
    claim's lease then expires and the job is reclaimed, not lost.
    """
    delay = 0.05
    errors = 0
    name = getattr(call, "__name__", call)
    while True:
        try:
            answer = call(*args)
            outage.answered()
            return answer
        except OUTAGE_ERRORS as exc:
            if stop is not None and stop():
                return None
            outage.failed(exc)
        except CorruptQueue as exc:  # retrying cannot mend it; the worker stops claiming from that queue
            log.error("cannot record %s: %s", name, exc)
            return None
        except redis.RedisError as exc:
            errors += 1
            if errors >= RECORD_ATTEMPTS_ON_ERROR:
                log.error(
                    "giving up on %s after %d errors (%s); the lease will expire and the job will be reclaimed",
                    name,
                    errors,
                    exc,
                )
                return None
            log.warning("%s: %s; retrying in %.1f s", name, exc, delay)
        time.sleep(delay)
        delay = min(delay * 2, RECORD_BACKOFF_CAP)


def claim_info(claim: Claim) -> JobInfo:
    """The JobInfo hooks and middleware see, built from the claim without a round trip."""
    return JobInfo(
        id=claim.id,
        task=claim.task,
        queue=claim.queue,
        args=claim.args,
        kwargs=claim.kwargs,
        priority=Priority(claim.priority) if 0 <= claim.priority <= 3 else Priority.NORMAL,
        state=JobState.RUNNING,
        attempts=claim.attempts,
        max_attempts=claim.max_attempts,
        created_at=None,
        scheduled_at=None,
        started_at=None,
        finished_at=None,
        headers=claim.headers or {},
    )


def run_claim(
    context: RunContext,
    claim: Claim,
    chain: Callable[[], Chain | None] | None = None,
    outage: Outage | None = None,
    *,
    reraise_interrupts: bool = False,
    defer: Defer | None = None,
) -> Outcome:
    """Run ``claim`` and record its outcome; ``chain()``, asked once the task has returned, may claim
    the next job in the same call (unless a shutdown began meanwhile). ``outage``: the process's, if any.
    ``defer``: a success nobody listens for is handed to it, to be recorded with others (a lane's batch)."""
    started = time.monotonic()
    outage = outage or Outage(context.broker.url)
    hooks = context.hooks
    # Built only for someone who reads it (middleware, hooks; a failure builds its own): a few µs a job.
    info = claim_info(claim) if hooks.middleware or hooks.handlers["job_started"] else None
    task = context.tasks.get(claim.task)
    if task is None:
        elsewhere: Elsewhere | None = getattr(context, "elsewhere", None)
        passed = elsewhere.pass_on(claim) if elsewhere is not None else None
        if passed is not None:  # another live worker serves it: left for that one (``foreign.py``)
            return Outcome(passed[0], time.monotonic() - started, passed[1], passed[2])
        error = f"UnknownTask: {UnknownTask.named(claim.task, context.name, context.tasks)}"
        return failed(context, claim, info, (error, "", None), started, outage, FailureKind.UNKNOWN_TASK)
    if info is not None:
        hooks.emit("job_started", info)
    current = enter(claim, context.broker.claims, context.broker.steps)
    try:
        with soft.running(claim.id, task.options.soft_timeout):
            if info is None:
                value = task.func(*claim.args, **claim.kwargs)
            else:
                value = hooks.run(info, lambda: task.func(*claim.args, **claim.kwargs))
    except Slept:  # the job is scheduled again already (``CurrentJob.sleep``): nothing to record
        return Outcome("slept", time.monotonic() - started)
    except BaseException as exc:  # SystemExit and KeyboardInterrupt too: the job's failure, not the child's end
        outcome = record_outcome(context, claim, info, started, outage, error=exc)
        if reraise_interrupts and not isinstance(exc, Exception):
            raise  # app.drain() runs in the user's own process: Ctrl-C stops it, once the job is recorded
        return outcome
    finally:
        leave(current)
    return record_outcome(context, claim, info, started, outage, value=value, chain=chain, defer=defer)


def record_outcome(
    context: RunContext,
    claim: Claim,
    info: JobInfo | None,
    started: float,
    outage: Outage,
    *,
    value: Any = None,
    error: BaseException | None = None,
    chain: Callable[[], Chain | None] | None = None,
    defer: Defer | None = None,
) -> Outcome:
    """Record what the task did (returned ``value`` or raised ``error``), then tell the hooks.

    Shared by lanes and the event loop (``aio_run.py``), which calls it off
    the loop: one place decides retries, dead letters and who hears of a final transition.
    """
    hooks = context.hooks
    if isinstance(error, Retry):
        delay = retry_delay(context, claim.task, claim.attempts, error.after)
        if error.exc is None:
            return failed(context, claim, info, (f"Retry: {error}", "", delay), started, outage, FailureKind.RETRY)
        # Retry(exc=err): the attempt failed with err, as Celery's self.retry(exc=err) records it.
        asked: Failure = (f"{type(error.exc).__name__}: {error.exc}", formatted(error.exc), delay)
        return failed(context, claim, info, asked, started, outage, FailureKind.RETRY, class_path(error.exc))
    if error is not None:
        text = f"{type(error).__name__}: {error}"
        refused = not_retried(context, claim, error)
        backoff = None if refused else retry_delay(context, claim.task, claim.attempts)
        if refused:
            text = f"{text} ({refused})"
        failure = (text, formatted(error), backoff)
        return failed(context, claim, info, failure, started, outage, FailureKind.EXCEPTION, class_path(error))
    duration = time.monotonic() - started
    try:
        result = dumps_result(value)
        if context.max_job_size and len(result) > context.max_job_size:
            raise SerializationError(
                f"the task's return value serializes to {len(result):,} bytes, over the "
                f"max_job_size of {context.max_job_size:,}; store big results elsewhere and return a reference"
            )
    except SerializationError as exc:
        return failed(
            context, claim, info, (f"SerializationError: {exc}", "", None), started, outage, FailureKind.SERIALIZATION
        )
    if defer is not None and not (claim.workflow or context.finals.every or hooks.handlers["job_succeeded"]):
        defer(claim, result)  # recorded with the lane's next claim, or within FLUSH_AFTER (batches.py)
        context.broker.claims.tally.time_claim(claim, duration)
        return Outcome("succeeded", duration)
    outcome = succeeded(context, claim, result, duration, chain, outage)
    if outcome.state == "succeeded":  # its wait and run time: the dashboard's per-task last hour
        context.broker.claims.tally.time_claim(claim, duration)
    if (claim.workflow or context.finals.every) and outcome.state == "succeeded":  # a plain job: this check only
        tell_finals(context, claim, "succeeded", result, busy=bool(outcome.next and outcome.next[0]))
    if outcome.state == "succeeded" and hooks.handlers["job_succeeded"]:  # no JobInfo copy for nobody
        done = replace(info or claim_info(claim), state=JobState.SUCCEEDED, result=value)
        hooks.emit("job_succeeded", done, result=value)
    return outcome


def formatted(error: BaseException) -> str:
    """The traceback a record keeps for ``error``."""
    return "".join(traceback.format_exception(type(error), error, error.__traceback__))


def succeeded(
    context: RunContext,
    claim: Claim,
    result: bytes,
    duration: float,
    chain: Callable[[], Chain | None] | None,
    outage: Outage,
) -> Outcome:
    broker = context.broker
    link = chain() if chain is not None else None
    if link is None:
        ok = record(broker.claims.succeed, claim.queue, claim.id, claim.token, result, outage=outage)
        ok = ok or (ok is False and recorded_success(broker.claims, claim))  # a lost reply, not a takeover
        state = "succeeded" if ok else (refusal(broker.claims, claim) if ok is False else None)
        return Outcome(state, duration)
    answer = record(
        broker.claims.succeed_and_claim,
        claim.queue,
        claim.id,
        claim.token,
        result,
        link.lease_ms,
        link.token,
        outage=outage,
    )
    if answer is None:
        return Outcome(None, duration)
    ok, following = answer
    ok = ok or recorded_success(broker.claims, claim)
    return Outcome("succeeded" if ok else refusal(broker.claims, claim), duration, next=following)


def tell_finals(
    context: RunContext, claim: Claim, state: str, result: bytes = b"", error: str = "", busy: bool = False
) -> None:
    """The final-transition seam (``finals.py``), for a job someone listens for: a workflow's step
    tells its workflow (at once, or through the child's courier when ``busy``: its lane already
    holds its next job). Never fails the job: what a listener leaves undone, the reconciler does."""
    transition = FinalTransition(claim.queue, claim.id, state, claim.workflow, result, error, busy)
    context.finals.ended(context.broker, transition)


Failure = tuple[str, str, float | None]  # error, traceback, seconds before a retry (None: dead at once)


def failed(
    context: RunContext,
    claim: Claim,
    info: JobInfo | None,
    failure: Failure,
    started: float,
    outage: Outage,
    kind: FailureKind = FailureKind.EXCEPTION,
    error_type: str | None = None,
) -> Outcome:
    """Record a failed run (retry or dead), then tell the hooks.

    ``error_type`` is the class path of the task's exception; None names
    the taskforge error of ``kind`` (``taskforge.errors.HardTimeout``...).
    """
    error, tb, retry_in = failure
    error_type = error_type or error_type_of_kind(kind.value)
    duration = time.monotonic() - started
    fail = context.broker.claims.fail
    state = record(fail, claim.queue, claim.id, claim.token, error, tb, retry_in, kind, error_type, outage=outage)
    if state == "fenced":  # a lost reply, not a takeover, when the record names this claim's report
        state = own_outcome(context.broker.claims, claim) or refusal(context.broker.claims, claim)
    if state in ("retrying", "dead"):
        context.broker.claims.tally.time_claim(claim, duration)
    if (claim.workflow or context.finals.every) and state == "dead":
        tell_finals(context, claim, "dead", error=error)
    notify_failure(context, info or claim_info(claim), state, error, tb, kind, error_type)
    return Outcome(state, duration, error, retry_in)


def notify_failure(
    context: RunContext,
    info: JobInfo,
    state: str | None,
    error: str,
    tb: str = "",
    kind: FailureKind | None = None,
    error_type: str | None = None,
) -> None:
    """job_failed for every failed run; job_dead too when it was the last."""
    if state not in ("retrying", "dead"):
        return
    final = JobState.DEAD if state == "dead" else JobState.RETRYING
    if error_type is None and kind is not None:
        error_type = error_type_of_kind(kind.value)
    after = replace(
        info, state=final, error=error, traceback=tb or None, failure=kind or info.failure, error_type=error_type
    )
    context.hooks.emit("job_failed", after, error=error)
    if state == "dead":
        context.hooks.emit("job_dead", after, error=error)


def adopted(context: RunContext, claim: Claim, outage: Outage) -> Claim:
    """A job sent by name takes max_attempts, max_worker_losses and timeout from this worker's task."""
    task = context.tasks.get(claim.task)
    if not claim.inherit or task is None:
        return claim
    opts = task.options
    adopt, losses = context.broker.claims.adopt, opts.max_worker_losses
    record(adopt, claim.queue, claim.id, claim.token, opts.max_attempts, opts.timeout, losses, outage=outage)
    return replace(claim, max_attempts=opts.max_attempts, timeout=opts.timeout, inherit=False)
