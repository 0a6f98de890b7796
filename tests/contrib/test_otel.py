"""OpenTelemetry across the queue: a real ``taskforge worker`` whose app exports its spans to a file.

The producer here holds a "request" span when it sends; the worker's run
spans, read back from the file its SDK exporter wrote, must be in that
trace, each the child of the PRODUCER span that ``delay()`` opened under the
request. A task that fails shows one span per attempt, each with its error.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from taskforge import JobState, TaskForge
from taskforge.contrib.otel import instrument
from tests.worker.conftest import Worker, stop_workers, wait_for

pytestmark = [pytest.mark.redis, pytest.mark.slow]

APP = """
import asyncio
import json
import os

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from taskforge import TaskForge
from taskforge.contrib.otel import instrument


class ToFile(InMemorySpanExporter):
    # The SDK's in-memory exporter, whose spans also go to a file the test reads.
    def export(self, spans):
        with open(os.environ["SPANS_FILE"], "a") as out:
            for span in spans:
                out.write(json.dumps({
                    "name": span.name,
                    "kind": span.kind.name,
                    "trace": format(span.context.trace_id, "032x"),
                    "span": format(span.context.span_id, "016x"),
                    "parent": format(span.parent.span_id, "016x") if span.parent else None,
                    "status": span.status.status_code.name,
                    "attributes": dict(span.attributes),
                    "events": [event.name for event in span.events],
                }) + "\\n")
        return super().export(spans)


provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(ToFile()))
app = TaskForge("traced")
instrument(app, tracer_provider=provider)


@app.task(name="traced.add")
def add(x, y):
    return x + y


@app.task(name="traced.boom", max_attempts=2, backoff=0.2)
def boom():
    raise ValueError("boom")


@app.task(name="traced.aadd")
async def aadd(x, y):
    await asyncio.sleep(0.01)
    return x + y
"""


@pytest.fixture
def traced(
    tmp_path: Path, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[TaskForge, InMemorySpanExporter, Path, Any]]:
    (tmp_path / "tracedapp.py").write_text(APP)
    spans_file = tmp_path / "spans.jsonl"
    workers: list[Worker] = []
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    producer = TaskForge("producer", broker=redis_url)
    instrument(producer, tracer_provider=provider)

    monkeypatch.setenv("SPANS_FILE", str(spans_file))  # read by the worker's app

    def start() -> Worker:
        worker = Worker(tmp_path, redis_url, ["-c", "1"], tmp_path / "worker.log", "tracedapp:app")
        workers.append(worker)
        return worker

    yield producer, exporter, spans_file, (provider, start)
    stop_workers(workers)


def read_spans(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_the_run_span_is_in_the_request_trace_a_child_of_its_send_span(traced) -> None:
    producer, exporter, spans_file, (provider, start) = traced
    start()
    tracer = provider.get_tracer("web")
    with tracer.start_as_current_span("request") as request:
        handle = producer.send("traced.add", 2, 3)
        ahandle = producer.send("traced.aadd", 4, 5)
    assert handle.result(timeout=30) == 5 and ahandle.result(timeout=30) == 9
    wait_for(lambda: len(read_spans(spans_file)) >= 2, 10, "the worker's spans")
    sends = {
        s.attributes["messaging.message.id"]: s for s in exporter.get_finished_spans() if s.kind is SpanKind.PRODUCER
    }
    trace_id = format(request.get_span_context().trace_id, "032x")
    for h in (handle, ahandle):
        send = sends[h.id]
        assert send.parent is not None and send.parent.span_id == request.get_span_context().span_id
        assert send.attributes["messaging.system"] == "taskforge"
        assert send.attributes["messaging.destination.name"] == "default"
        [run] = [s for s in read_spans(spans_file) if s["attributes"]["messaging.message.id"] == h.id]
        assert run["kind"] == "CONSUMER" and run["trace"] == trace_id
        assert run["parent"] == format(send.context.span_id, "016x")
        assert run["attributes"]["messaging.operation.type"] == "process"
        assert run["attributes"]["taskforge.attempt"] == 1
        assert run["attributes"]["taskforge.outcome"] == "succeeded" and run["status"] == "UNSET"
    # The job record carries the context, as headers apart from the arguments.
    assert set(handle.info().headers) >= {"traceparent"} and handle.info().args == (2, 3)


def test_each_attempt_is_a_span_of_the_trace_and_carries_the_error(traced) -> None:
    producer, exporter, spans_file, (provider, start) = traced
    start()
    with provider.get_tracer("web").start_as_current_span("request") as request:
        handle = producer.send("traced.boom")
    wait_for(lambda: handle.status() is JobState.DEAD or None, 30, "boom to die")
    wait_for(lambda: len(read_spans(spans_file)) >= 2, 10, "both attempts' spans")
    runs = sorted(read_spans(spans_file), key=lambda s: s["attributes"]["taskforge.attempt"])
    assert [r["attributes"]["taskforge.attempt"] for r in runs] == [1, 2]
    assert [r["attributes"]["taskforge.outcome"] for r in runs] == ["retrying", "dead"]
    trace_id = format(request.get_span_context().trace_id, "032x")
    for run in runs:
        assert run["trace"] == trace_id and run["status"] == "ERROR"
        assert run["events"] == ["exception"] and run["attributes"]["error.type"] == "ValueError"
    [send] = [s for s in exporter.get_finished_spans() if s.kind is SpanKind.PRODUCER]
    assert {r["parent"] for r in runs} == {format(send.context.span_id, "016x")}
    assert send.status.status_code is StatusCode.UNSET
