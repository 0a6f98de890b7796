"""Producer hooks: user code around every enqueue, where integrations add job headers.

A worker's middleware wraps each run; its producer-side twin wraps each
store. ``@app.around_enqueue`` registers a function called with an
``Outgoing`` just before the jobs of one call are stored (one ``delay()``,
one ``delay_many()``, one workflow's first steps). It may add headers to
``outgoing.headers``, which every job of that call then carries, and it may
return a context manager, which is held around the store: a tracing span
opened there sees the store's outcome, its exception included.

An app with no hook pays one empty-list test per enqueue and its jobs carry
no headers at all, byte for byte the same record as before headers existed.
A hook that raises fails the enqueue and nothing is stored: a producer that
cannot add what it promised (a tenant id, say) should not send the job
without it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from .broker.record import encode_headers
from .building import check_size
from .errors import ConfigurationError, SerializationError

if TYPE_CHECKING:
    from .broker.queue import NewJob
    from .task import Task


@dataclass
class Outgoing:
    """One enqueue as a producer hook sees it: which jobs, where, and the headers they will carry.

    ``operation`` is ``"send"`` (``delay``, ``apply_at``, ``apply_in``,
    ``app.send`` and their awaited forms), ``"send_many"`` (``delay_many``)
    or ``"workflow"`` (a workflow's record and its first steps: every later
    step carries the same headers). ``job_ids`` are the ids the jobs are
    stored under (a chosen ``job_id`` already taken returns the existing job
    instead); for a workflow, its steps' ids.
    """

    operation: str
    task: str
    queue: str
    job_ids: tuple[str, ...]
    headers: dict[str, str] = field(default_factory=dict)


SendHook = Callable[[Outgoing], "AbstractContextManager[Any] | None"]


def check_hook(func: Any) -> None:
    if not callable(func):
        raise ConfigurationError(f"@app.around_enqueue decorates a function (outgoing), not {func!r}")


@contextmanager
def around(hooks: Sequence[SendHook], outgoing: Outgoing) -> Iterator[dict[str, str]]:
    """Call every hook, the first registered outermost, and hold what they return around the body,
    which gets the headers the hooks added."""
    with ExitStack() as stack:
        for hook in hooks:
            held = hook(outgoing)
            if held is not None:
                stack.enter_context(held)
        yield outgoing.headers


@contextmanager
def sending(
    hooks: Sequence[SendHook], outgoing: Outgoing, jobs: list[NewJob], task: Task[Any, Any]
) -> Iterator[list[NewJob]]:
    """``around`` the store of ``jobs`` (of ``task``), which the body gets back carrying the hooks' headers."""
    with around(hooks, outgoing) as headers:
        yield stamped(jobs, headers, task)


def stamped(jobs: list[NewJob], headers: dict[str, str], task: Task[Any, Any]) -> list[NewJob]:
    """``jobs`` carrying ``headers`` (the record's ``headers`` field), each checked again
    against ``max_job_size``, which counts them."""
    if not headers:
        return jobs
    check_headers(headers)
    field = encode_headers(headers)
    out = [replace(job, fields={**(job.fields or {}), "headers": field}) for job in jobs]
    for job in out:
        check_size(task, job.payload, job.unique_digest, job.fields)
    return out


def check_headers(headers: dict[str, str]) -> None:
    """Headers are a small map of str to str (trace context, tenant ids): anything else is a SerializationError."""
    for name, value in headers.items():
        if type(name) is not str or type(value) is not str or not name:
            raise SerializationError(f"job headers map non-empty str names to str values, got {name!r}: {value!r:.60}")


def announce(after_enqueue: Sequence[Callable[[Any], object]], handle: Any) -> None:
    """Tell an app's ``after_enqueue`` callbacks that a job was stored (a callback's error propagates).

    A function here rather than a method of the app: the app's own surface is
    what users call, and this is the producer's seam.
    """
    for callback in list(after_enqueue):
        callback(handle)
