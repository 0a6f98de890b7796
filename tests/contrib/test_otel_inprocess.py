"""OpenTelemetry spans of every kind of enqueue, and their runs, in one process (memory://, app.drain())."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from taskforge import TaskForge, chain, group
from taskforge.contrib.otel import instrument


@pytest.fixture
def traced() -> tuple[TaskForge, InMemorySpanExporter, TracerProvider]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    app = TaskForge("traced", broker="memory://")
    instrument(app, tracer_provider=provider)
    instrument(app, tracer_provider=provider)  # a second call changes nothing
    return app, exporter, provider


def test_a_bulk_enqueue_is_one_span_and_each_run_its_child(traced) -> None:
    app, exporter, provider = traced

    @app.task
    def echo(x: Any) -> Any:
        return x

    with provider.get_tracer("web").start_as_current_span("request"):
        handles = echo.delay_many([(i,) for i in range(3)])
    app.drain()
    spans = exporter.get_finished_spans()
    [send] = [s for s in spans if s.kind is SpanKind.PRODUCER]
    assert send.attributes["messaging.batch.message_count"] == 3
    assert send.attributes["messaging.operation.name"] == "send_many"
    runs = [s for s in spans if s.kind is SpanKind.CONSUMER]
    assert sorted(r.attributes["messaging.message.id"] for r in runs) == sorted(h.id for h in handles)
    assert {r.parent.span_id for r in runs} == {send.context.span_id}  # type: ignore[union-attr]
    assert {r.context.trace_id for r in runs} == {send.context.trace_id}


def test_every_step_of_a_workflow_runs_in_the_trace_of_its_start(traced) -> None:
    app, exporter, provider = traced

    @app.task
    def add(x: int, y: int) -> int:
        return x + y

    @app.task
    def total(values: list[int]) -> int:
        return sum(values)

    with provider.get_tracer("web").start_as_current_span("request"):
        flow = chain(add.s(1, 2), group(add.s(1), add.s(2)), total.s()).delay()
    app.drain()
    assert flow.result(timeout=5) == 9
    spans = exporter.get_finished_spans()
    [send] = [s for s in spans if s.kind is SpanKind.PRODUCER]
    assert send.attributes["messaging.operation.name"] == "workflow"
    assert send.attributes["taskforge.workflow"] == flow.id
    runs = [s for s in spans if s.kind is SpanKind.CONSUMER]
    assert len(runs) == 4 and {r.parent.span_id for r in runs} == {send.context.span_id}  # type: ignore[union-attr]


def test_a_failed_enqueue_ends_its_span_with_the_error(traced) -> None:
    app, exporter, _ = traced
    app.max_size = 1

    @app.task
    def echo(x: Any) -> Any:
        return x

    echo.delay(1)
    with pytest.raises(Exception) as caught:
        echo.delay(2)
    failed = exporter.get_finished_spans()[-1]
    assert failed.kind is SpanKind.PRODUCER and failed.status.status_code.name == "ERROR"
    assert [e.name for e in failed.events] == ["exception"] and type(caught.value).__name__ in failed.status.description
