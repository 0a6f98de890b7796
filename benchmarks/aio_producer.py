"""Async producer throughput: ``adelay()`` from one event loop against ``delay()`` from one thread.

Both store the same jobs through the same Lua script. The async side runs
``--producers`` coroutines (default 50) on one loop, sharing the app's one
connection pool for that loop; the sync side is one thread calling
``delay()`` back to back, one round trip at a time. Rounds alternate
(sync, async, sync, ...) so a drift of the machine hits both. Prints jobs/s
of each, and the ratio. Run from the repository root:

    python benchmarks/aio_producer.py [--jobs 10000] [--producers 50] [--rounds 3] [--redis redis://127.0.0.1:6379/12]

The database of ``--redis`` is flushed before each round and at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time

import redis

from taskforge import TaskForge


def make_app(url: str) -> tuple[TaskForge, object]:
    app = TaskForge("bench-aio", broker=url)

    @app.task(name="bench.noop")
    def noop(n: int) -> None:
        return None

    return app, noop


def sync_round(url: str, jobs: int) -> float:
    app, noop = make_app(url)
    noop.delay(-1)  # connect and learn the queue before the clock starts
    started = time.perf_counter()
    for i in range(jobs):
        noop.delay(i)  # type: ignore[attr-defined]
    return jobs / (time.perf_counter() - started)


async def async_round(url: str, jobs: int, producers: int) -> float:
    app, noop = make_app(url)
    await noop.adelay(-1)  # type: ignore[attr-defined]
    # Open the pool's connections before the clock starts, as the sync side has its one.
    await asyncio.gather(*(app.async_broker().client.ping() for _ in range(producers)))
    share = [jobs // producers + (1 if p < jobs % producers else 0) for p in range(producers)]

    async def produce(count: int) -> None:
        for i in range(count):
            await noop.adelay(i)  # type: ignore[attr-defined]

    started = time.perf_counter()
    await asyncio.gather(*(produce(count) for count in share))
    rate = jobs / (time.perf_counter() - started)
    await app.aclose()
    return rate


def rounds(rates: list[float]) -> str:
    return ", ".join(f"{r:,.0f}" for r in rates)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--producers", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/12")
    args = parser.parse_args()
    side = redis.Redis.from_url(args.redis)
    sync_rates, async_rates = [], []
    for _ in range(args.rounds):
        side.flushdb()
        sync_rates.append(sync_round(args.redis, args.jobs))
        side.flushdb()
        async_rates.append(asyncio.run(async_round(args.redis, args.jobs, args.producers)))
    side.flushdb()
    sync_rate, async_rate = statistics.median(sync_rates), statistics.median(async_rates)
    label = f"async adelay(), {args.producers} producers, one loop:"
    print(f"{'sync delay(), one thread:':<45}{sync_rate:9,.0f} jobs/s  (rounds: {rounds(sync_rates)})")
    print(f"{label:<45}{async_rate:9,.0f} jobs/s  (rounds: {rounds(async_rates)})")
    print(f"ratio async/sync: {async_rate / sync_rate:.2f}x")
    print(
        json.dumps(
            {
                "jobs": args.jobs,
                "producers": args.producers,
                "rounds": args.rounds,
                "sync_jobs_per_s": round(sync_rate),
                "async_jobs_per_s": round(async_rate),
                "ratio": round(async_rate / sync_rate, 3),
            }
        )
    )


if __name__ == "__main__":
    main()
