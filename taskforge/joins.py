"""Joins inside a running task: refused in a worker, run first in eager and ``app.drain()`` modes.

A task that blocks on another job's result holds its worker's slot while
it waits, and the job it waits for may need that very slot: with ``-c 1``
(or every slot so joined) it never runs, and the caller waits forever while
nothing is logged. Celery refuses such a join ("Never call result.get()
within a task!"); so does taskforge, with a ``RuntimeError`` that names the
way out: a workflow (``chain``, ``group``, ``chord``), or ``allow_join=True``
for a caller that knows another worker serves the job.

In process (``app.drain()``, eager mode) nothing else would ever run the
job waited on, so a join on a job of the app being drained runs that app's
ready jobs, through the same claims as any drained job, until the one
waited on has ended; a job the drain cannot run (scheduled for later, or
the caller itself) is a ``RuntimeError`` at once, never a wait.

The rule holds for every blocking wait: ``result()``, ``get()`` and their
awaited forms, of jobs and of workflows. A read that does not wait
(``timeout=0``, ``status()``, ``info()``) is always allowed. The rule does not
look at whether the job has already ended: a join that works only when the
other job happened to be fast is the bug it guards against.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass

from .context import running

WORKFLOWS = (
    "chain(a.s(...), b.s()) passes a's result to b, group(...) runs jobs side by side, "
    "chord(group(...), c.s()) hands their results to c (see the workflows guide)"
)


@dataclass(frozen=True)
class InProcess:
    """The drain running in this context: its app, and how to run that app's ready jobs until ``done()``."""

    app: object
    run_until: Callable[[Callable[[], bool]], None]


@dataclass(frozen=True)
class Join:
    """One blocking wait about to start: on what (``what``, of ``app``), how long, and how to tell it ended."""

    app: object
    what: str
    timeout: float | None
    allow_join: bool
    done: Callable[[], bool]
    state: Callable[[], object]


_draining: ContextVar[InProcess | None] = ContextVar("taskforge_draining", default=None)


def draining(here: InProcess) -> object:
    """Mark this context as running ``here``'s jobs in process; ``undrain`` with what it returns."""
    return _draining.set(here)


def undrain(token: object) -> None:
    _draining.reset(token)  # type: ignore[arg-type]


def joining(join: Join) -> InProcess | None:
    """Whether ``join`` may wait; raises when it may not.

    None: wait as usual (outside a task, a read that does not wait, or
    ``allow_join``). An ``InProcess``: the caller runs in a drain of ``app``,
    so the join runs the job first (``run_first``).
    """
    job = running()
    if job is None or join.timeout == 0:
        return None
    here = _draining.get()
    if here is not None and here.app is join.app:
        return here
    if join.allow_join:
        return None
    raise RuntimeError(
        f"a blocking join of {join.what} inside a running task (job {job.id}, task {job.task!r}): the task holds "
        "its worker's slot while it waits, and the job it waits for may need that very slot (with -c 1 it "
        f"never runs: a deadlock). Let a workflow carry the value instead: {WORKFLOWS}. If another worker "
        "surely serves that job, pass allow_join=True to wait anyway; a read that does not wait "
        "(result(timeout=0), status(), info()) is always allowed"
    )


def run_first(here: InProcess, join: Join) -> None:
    """Run the drained app's ready jobs until ``join.done()``; RuntimeError if the drain cannot get it
    there, unless ``allow_join`` (the caller says something else runs the job: it waits, as it asked)."""
    here.run_until(join.done)
    if not join.done() and not join.allow_join:
        raise cannot_run(join.what, join.state())


def before_waiting(join: Join) -> None:
    """What a join does before it waits: refuse, run the job first, or nothing (``joining``)."""
    if (here := joining(join)) is not None:
        run_first(here, join)


async def abefore_waiting(join: Join) -> None:
    """``before_waiting`` from a coroutine: the drain's passes in a thread (with this context), so the
    loop stays free to run the async jobs they send back to it."""
    if (here := joining(join)) is not None:
        await asyncio.to_thread(run_first, here, join)


def cannot_run(what: str, state: object) -> RuntimeError:
    return RuntimeError(
        f"a join of {what} inside a task run in process (app.drain() or eager mode): the drain ran every job "
        f"it could and could not run it (state: {state}), so the join would only wait. A job scheduled for "
        "later needs drain(advance=...), which a task cannot ask for; a job cannot wait for itself. "
        f"Let a workflow carry the value instead: {WORKFLOWS}"
    )
