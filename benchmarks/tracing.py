"""What headers and tracing cost an enqueue: ``delay()`` with and without ``instrument(app)``.

Four producers store the same no-op jobs through the same Lua script, in
alternating rounds so a drift of the machine hits all of them:

- ``store only``: ``build_job`` and ``broker.jobs.enqueue``, what ``delay()``
  did before producer hooks existed (the baseline);
- ``delay(), uninstrumented``: today's ``delay()`` on an app with no hook;
  its ratio to the baseline is what hooks cost an app that does not use them;
- ``delay(), instrumented, API only``: ``instrument(app)`` with no SDK
  installed as the tracer provider (OpenTelemetry's no-op tracer);
- ``delay(), instrumented, SDK``: spans recorded by the SDK into its
  in-memory exporter, traceparent written into every job.

Run from the repository root:

    python benchmarks/tracing.py [--jobs 5000] [--rounds 5] [--redis redis://127.0.0.1:6379/12]

The database of ``--redis`` is flushed before each round and at the end.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

import redis
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from taskforge import TaskForge
from taskforge.building import build_job
from taskforge.contrib.otel import instrument


def make_app(url: str, variant: str) -> tuple[TaskForge, Any]:
    app = TaskForge(f"bench-{variant}", broker=url)

    @app.task(name="bench.noop")
    def noop(n: int) -> None:
        return None

    if variant == "api":
        instrument(app, tracer_provider=trace.NoOpTracerProvider())
    elif variant == "sdk":
        provider = TracerProvider()
        exporter = InMemorySpanExporter()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        instrument(app, tracer_provider=provider)
    return app, noop


def one_round(url: str, variant: str, jobs: int) -> float:
    app, noop = make_app(url, variant)
    noop.delay(-1)  # connect and load the scripts before the clock starts
    send: Callable[[int], object]
    if variant == "store":
        broker, queue, limit = app.broker, noop.queue, app.max_size

        def send(i: int) -> object:
            return broker.jobs.enqueue(queue, [build_job(noop, (i,), {})], limit, resend=False)
    else:
        send = noop.delay
    started = time.perf_counter()
    for i in range(jobs):
        send(i)
    return jobs / (time.perf_counter() - started)


LABELS = {
    "store": "store only (before hooks)",
    "plain": "delay(), uninstrumented",
    "api": "delay(), instrumented, API only",
    "sdk": "delay(), instrumented, SDK",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=5_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/12")
    args = parser.parse_args()
    side = redis.Redis.from_url(args.redis)
    rates: dict[str, list[float]] = {variant: [] for variant in LABELS}
    for _ in range(args.rounds):
        for variant in LABELS:
            side.flushdb()
            rates[variant].append(one_round(args.redis, variant, args.jobs))
    side.flushdb()
    medians = {variant: statistics.median(r) for variant, r in rates.items()}
    base = medians["store"]
    for variant, label in LABELS.items():
        shown = ", ".join(f"{r:,.0f}" for r in rates[variant])
        print(f"{label + ':':<36}{medians[variant]:9,.0f} jobs/s  {medians[variant] / base:5.2f}x  (rounds: {shown})")
    summary = {"jobs": args.jobs, "rounds": args.rounds}
    summary.update({f"{v}_jobs_per_s": round(m) for v, m in medians.items()})
    summary.update({f"{v}_ratio": round(m / base, 3) for v, m in medians.items()})
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
