"""The producer side of one workload, run by ``run.py`` inside one library's venv.

    python driver.py PEER enqueue --n N [--no-floor]   W1: N calls of the normal API, then N bare SETs
    python driver.py PEER bulk --n N                    W1b: one bulk call of N jobs
    python driver.py PEER latency --n N                 W3: N jobs one at a time, each after the previous started
    python driver.py PEER stamp --n N                   N stamp jobs, not waited for (worker start)

Prints one JSON object on stdout. PEER is a module of ``peers/``; what it
must define is described in ``peers/__init__.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import inspect
import json
import os
import sys
import time
from typing import Any

import redis
from peers import _common

WARMUP_TIMEOUT = 60.0
STEP_TIMEOUT = 10.0


class Producer:
    """A peer module's producer functions, called the same way whether they are sync or async."""

    def __init__(self, module: Any) -> None:
        self.module = module
        self.is_async = inspect.iscoroutinefunction(module.send_noop)
        self.loop = asyncio.new_event_loop() if self.is_async else None

    def run(self, value: Any) -> Any:
        return self.loop.run_until_complete(value) if self.loop else value

    def open(self) -> None:
        if hasattr(self.module, "open_producer"):
            self.run(self.module.open_producer())

    def close(self) -> None:
        if hasattr(self.module, "close_producer"):
            self.run(self.module.close_producer())
        if self.loop:
            self.loop.close()

    def timed_loop(self, send: Any, n: int) -> float:
        """Seconds for ``n`` calls of ``send``, awaited one after the other when async."""
        if self.loop:

            async def many() -> float:
                begin = time.perf_counter()
                for _ in range(n):
                    await send()
                return time.perf_counter() - begin

            return self.loop.run_until_complete(many())
        begin = time.perf_counter()
        for _ in range(n):
            send()
        return time.perf_counter() - begin


def floor(n: int) -> float:
    """N bare SETs with redis-py from this process: the round-trip floor right now."""
    client = redis.Redis.from_url(_common.counter_url())
    client.ping()
    begin = time.perf_counter()
    for i in range(n):
        client.set("bench:floor", i)
    elapsed = time.perf_counter() - begin
    client.close()
    return elapsed


def async_floor(n: int) -> float:
    """The same with redis.asyncio, awaited one by one: the floor an async producer loop can reach."""
    import redis.asyncio

    async def go() -> float:
        client = redis.asyncio.Redis.from_url(_common.counter_url())
        await client.ping()
        begin = time.perf_counter()
        for i in range(n):
            await client.set("bench:floor", i)
        elapsed = time.perf_counter() - begin
        await client.aclose() if hasattr(client, "aclose") else await client.close()
        return elapsed

    return asyncio.run(go())


def enqueue(producer: Producer, n: int, with_floor: bool) -> dict[str, Any]:
    seconds = producer.timed_loop(producer.module.send_noop, n)
    out: dict[str, Any] = {"n": n, "seconds": seconds}
    if with_floor:
        out["floor_seconds"] = floor(n)
        if producer.is_async:
            out["async_floor_seconds"] = async_floor(n)
    return out


def bulk(producer: Producer, n: int) -> dict[str, Any]:
    if not hasattr(producer.module, "send_noop_bulk"):
        return {"n": n, "skipped": "no bulk API"}
    begin = time.perf_counter()
    producer.run(producer.module.send_noop_bulk(n))
    return {"n": n, "seconds": time.perf_counter() - begin}


def latency(producer: Producer, n: int) -> dict[str, Any]:
    """Task start minus the start of the enqueue call, each job sent after the previous one started."""
    side = redis.Redis.from_url(_common.counter_url())
    side.delete(_common.STARTED)
    # Warm-up: the worker's processes are up and have run one job; then let it go idle.
    producer.run(producer.module.send_stamp())
    if side.blpop([_common.STARTED], timeout=WARMUP_TIMEOUT) is None:
        raise TimeoutError(f"warm-up job did not start within {WARMUP_TIMEOUT:g} s")
    time.sleep(1.0)
    samples = []
    for i in range(n):
        begin = time.time()
        producer.run(producer.module.send_stamp())
        reply = side.blpop([_common.STARTED], timeout=STEP_TIMEOUT)
        if reply is None:
            raise TimeoutError(f"job {i} of {n} did not start within {STEP_TIMEOUT:g} s")
        samples.append((float(reply[1]) - begin) * 1000)
    side.close()
    return {"n": n, "latencies_ms": [round(s, 4) for s in samples]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("peer")
    parser.add_argument("action", choices=["enqueue", "bulk", "latency", "stamp"])
    parser.add_argument("--n", type=int, required=True)
    parser.add_argument("--no-floor", action="store_true")
    opts = parser.parse_args()
    module = importlib.import_module(f"peers.{opts.peer}")
    producer = Producer(module)
    try:
        producer.open()
        if opts.action == "enqueue":
            result = enqueue(producer, opts.n, not opts.no_floor)
        elif opts.action == "bulk":
            result = bulk(producer, opts.n)
        elif opts.action == "stamp":
            producer.timed_loop(producer.module.send_stamp, opts.n)
            result = {"n": opts.n}
        else:
            result = latency(producer, opts.n)
    except Exception as exc:  # reported as this workload's failure, not a crash of the harness
        result = {"error": f"{type(exc).__name__}: {exc}"}
    try:
        producer.close()
    except Exception as exc:
        result.setdefault("close_error", f"{type(exc).__name__}: {exc}")
    json.dump(result, sys.stdout)
    sys.stdout.write("\n")
    sys.stdout.flush()
    os._exit(0)  # some libraries leave non-daemon threads behind; the result is out


if __name__ == "__main__":
    main()
