"""OpenTelemetry tracing across the queue: one trace from the request that enqueues to the run.

``instrument(app)`` adds two things to an app, and nothing else:

- a producer hook (``app.around_enqueue``) that opens a PRODUCER span around
  every store (``delay``, ``apply_*``, ``delay_many``, ``app.send``, their
  awaited forms, a workflow's start) and writes the W3C ``traceparent`` and
  ``tracestate`` of that span into the job's headers;
- a middleware that opens a CONSUMER span around every run in the worker,
  whose parent is the producer's span read back from those headers. Each
  attempt is a span of its own in the same trace, so a retried job shows
  its failed runs and its last one side by side.

Attributes follow OpenTelemetry's messaging conventions:
``messaging.system`` = ``"taskforge"``, ``messaging.operation.type``
(``send`` / ``process``, and the older ``messaging.operation``),
``messaging.destination.name`` = the queue, ``messaging.message.id`` = the
job id; plus ``taskforge.task``, ``taskforge.attempt``,
``taskforge.max_attempts`` and ``taskforge.outcome`` (``succeeded``,
``retrying``, ``dead``). A failed run records its exception and an ERROR
status. A run the worker kills (hard timeout, a crashed child) ends no span:
the process holding it is gone.

Only ``opentelemetry-api`` is needed (the ``otel`` extra); which SDK,
exporter and sampler run is the application's choice, configured as usual
before ``instrument`` or after: spans go to whatever tracer provider is
global when they start. Instrument the app in the module the worker imports
(``taskforge worker myapp:app``), so producers and workers both have it.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from ..app import TaskForge
from ..job import JobInfo
from ..sending import Outgoing

SYSTEM = "taskforge"
_INSTRUMENTED = "_taskforge_otel"


def instrument(app: TaskForge, tracer_provider: trace.TracerProvider | None = None) -> None:
    """Trace every enqueue and every run of ``app``; calling it twice changes nothing."""
    if getattr(app, _INSTRUMENTED, False):
        return
    tracer = trace.get_tracer("taskforge", tracer_provider=tracer_provider)

    def producer(outgoing: Outgoing) -> AbstractContextManager[Any]:
        span = tracer.start_span(
            f"send {outgoing.task}",
            kind=SpanKind.PRODUCER,
            attributes=_producer_attributes(outgoing),
        )
        propagate.inject(outgoing.headers, context=trace.set_span_in_context(span))
        return trace.use_span(span, end_on_exit=True, record_exception=True, set_status_on_exception=True)

    def consumer(job: JobInfo, call_next: Callable[[], Any]) -> Any:
        parent = propagate.extract(job.headers) if job.headers else None
        span = tracer.start_span(
            f"process {job.task}", context=parent, kind=SpanKind.CONSUMER, attributes=_consumer_attributes(job)
        )
        token = otel_context.attach(trace.set_span_in_context(span))
        try:
            value = call_next()
        except BaseException as exc:
            _failed(span, job, exc)
            span.end()
            raise
        finally:
            otel_context.detach(token)
        if inspect.isawaitable(value):
            return _awaited(span, job, value)
        span.set_attribute("taskforge.outcome", "succeeded")
        span.end()
        return value

    app.around_enqueue(producer)
    app.middleware(consumer)
    setattr(app, _INSTRUMENTED, True)


async def _awaited(span: Span, job: JobInfo, value: Awaitable[Any]) -> Any:
    """An async task's run, awaited with its span current (the middleware only saw its coroutine made)."""
    with trace.use_span(span, end_on_exit=True, record_exception=False, set_status_on_exception=False):
        try:
            result = await value
        except BaseException as exc:
            _failed(span, job, exc)
            raise
        span.set_attribute("taskforge.outcome", "succeeded")
        return result


def _failed(span: Span, job: JobInfo, exc: BaseException) -> None:
    # The worker decides after the run (retry filters may end a job early);
    # the attempt count is what a span can know, and it is right unless a
    # filter intervened.
    span.record_exception(exc)
    span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
    span.set_attribute("taskforge.outcome", "dead" if job.attempts >= job.max_attempts else "retrying")
    span.set_attribute("error.type", type(exc).__qualname__)


def _producer_attributes(outgoing: Outgoing) -> dict[str, Any]:
    attributes: dict[str, Any] = {
        "messaging.system": SYSTEM,
        "messaging.operation": "publish",
        "messaging.operation.type": "send",
        "messaging.operation.name": outgoing.operation,
        "messaging.destination.name": outgoing.queue,
        "taskforge.task": outgoing.task,
    }
    if len(outgoing.job_ids) == 1:
        attributes["messaging.message.id"] = outgoing.job_ids[0]
    else:
        attributes["messaging.batch.message_count"] = len(outgoing.job_ids)
    if outgoing.operation == "workflow" and outgoing.job_ids:
        attributes["taskforge.workflow"] = outgoing.job_ids[0].rpartition(".")[0]
    return attributes


def _consumer_attributes(job: JobInfo) -> dict[str, Any]:
    return {
        "messaging.system": SYSTEM,
        "messaging.operation": "process",
        "messaging.operation.type": "process",
        "messaging.destination.name": job.queue,
        "messaging.message.id": job.id,
        "taskforge.task": job.task,
        "taskforge.attempt": job.attempts,
        "taskforge.max_attempts": job.max_attempts,
    }
