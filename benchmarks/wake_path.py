"""Where an idle worker's latency goes before Python sees the job: the wake path, step by step.

Idle latency (``latency.py``, W3 of ``run.py``) is, in order: the producer's
client work before its ``EVALSHA`` leaves, the enqueue script inside Redis,
the wake of the lane's blocking pop and the dequeue script pipelined behind
it, the reply's trip, then the lane's Python up to the task body. This
prints the parts that do not need the worker, each beside what a bare
``LPUSH``/``BLPOP`` queue (Huey's shape) pays for the same step:

  send -> reply   from the producer's send to the blocked consumer holding
                  its reply: bare LPUSH -> BLPOP, and taskforge's enqueue ->
                  BLPOP + pipelined dequeue (the lane's own call), rounds interleaved
  Redis time      per call, from INFO commandstats: enqueue, a one-job dequeue,
                  a script that returns at once (the floor of any EVALSHA), LPUSH
  client CPU      of the producer per delay(), against one LPUSH

Uses database 13 of the Redis given (FLUSHDB before and after); run it on a
private server (``redis-server --port 6394 --save '' --appendonly no``):

    python benchmarks/wake_path.py --redis redis://127.0.0.1:6394/13 [--jobs 300] [--rounds 3]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # this checkout's taskforge, not an installed one

import redis  # noqa: E402

from taskforge import TaskForge  # noqa: E402
from taskforge.broker.compat import block_timeout  # noqa: E402
from taskforge.broker.hints import dequeue_call  # noqa: E402
from taskforge.broker.keys import QueueKeys  # noqa: E402
from taskforge.broker.record import new_token  # noqa: E402

QUEUE = "default"
LEASE_MS = 30_000


def make_app(url: str) -> tuple[TaskForge, Any]:
    app = TaskForge("wakepath", broker=url)

    @app.task(name="wakepath.noop")
    def noop() -> None:
        pass

    return app, noop


def consumer(url: str, mode: str, jobs: int, out: Any) -> None:
    """Block as an idle lane does and report when each reply is in hand (wall clock, shared with the parent)."""
    if mode == "bare":
        client = redis.Redis.from_url(url)
        for _ in range(jobs):
            client.blpop(["wakepath:bare"], timeout=10)
            out.put(time.time())
        return
    app, _ = make_app(url)
    claims, q = app.broker.claims, QueueKeys(QUEUE)
    for _ in range(jobs):
        token = new_token()
        call = dequeue_call(q, token, LEASE_MS, 1, claims.hints.claim_flags(QUEUE, token))
        pipe = claims.client.pipeline(transaction=False)
        pipe.blpop([q.wake], timeout=block_timeout(10))
        pipe.execute_command(*claims.scripts.command(call))
        _, raw = pipe.execute()
        out.put(time.time())
        claim = call.decode(raw).rows[0]
        claims.succeed(QUEUE, claim.id.decode(), token, b"\xc0")


def send_to_reply(url: str, mode: str, jobs: int) -> list[float]:
    """ms from just before the producer's call to the consumer holding its reply, one job at a time."""
    client = redis.Redis.from_url(url)
    client.flushdb()
    _, noop = make_app(url)
    noop.delay()  # scripts loaded, connection open
    client.flushdb()
    out: Any = mp.Queue()
    child = mp.Process(target=consumer, args=(url, mode, jobs, out))
    child.start()
    time.sleep(1.0)
    times = []
    for _ in range(jobs):
        time.sleep(0.002)  # the consumer is blocked again
        begin = time.time()
        if mode == "bare":
            client.lpush("wakepath:bare", b"x" * 100)
        else:
            noop.delay()
        times.append((out.get(timeout=10) - begin) * 1000)
    child.join(30)
    return times


def redis_us(client: redis.Redis, call: Any, n: int, command: str = "evalsha") -> float:
    """Mean µs per call inside Redis of ``n`` calls of ``call()`` (INFO commandstats)."""
    client.config_resetstat()
    for _ in range(n):
        call()
    stats = client.info("commandstats")[f"cmdstat_{command}"]
    return float(stats["usec"]) / float(stats["calls"])


def client_cpu_us(call: Any, n: int) -> float:
    begin = time.process_time()
    for _ in range(n):
        call()
    return (time.process_time() - begin) / n * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--redis", default=os.environ.get("BENCH_REDIS", "redis://127.0.0.1:6379/13"))
    parser.add_argument("--jobs", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    opts = parser.parse_args()
    mp.set_start_method("fork")
    url = opts.redis
    client = redis.Redis.from_url(url)
    app, noop = make_app(url)
    claims = app.broker.claims
    trivial = client.script_load("return 1")
    floor: dict[str, list[float]] = {"bare": [], "taskforge": []}
    parts: dict[str, list[float]] = {}
    try:
        for _ in range(opts.rounds):
            for mode in floor:
                floor[mode] += send_to_reply(url, mode, opts.jobs)
            client.flushdb()
            noop.delay()
            figures = {
                "redis enqueue (delay)": redis_us(client, noop.delay, opts.jobs),
                "redis dequeue of one job": redis_us(
                    client, lambda: claims.dequeue(QUEUE, LEASE_MS, 1, new_token()), opts.jobs
                ),
                "redis EVALSHA floor (return 1)": redis_us(client, lambda: client.evalsha(trivial, 0), opts.jobs),
                "redis LPUSH": redis_us(client, lambda: client.lpush("wakepath:x", b"x" * 100), opts.jobs, "lpush"),
                "client CPU per delay()": client_cpu_us(noop.delay, opts.jobs),
                "client CPU per LPUSH": client_cpu_us(lambda: client.lpush("wakepath:x", b"x" * 100), opts.jobs),
            }
            for name, value in figures.items():
                parts.setdefault(name, []).append(value)
            client.flushdb()
    finally:
        client.flushdb()
    for mode, values in floor.items():
        ordered = sorted(values)
        p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
        p50 = statistics.median(values)
        print(f"send -> reply, {mode:9s}: p50 {p50:.3f} ms, p99 {p99:.3f} ms ({len(values)} jobs)")
    for name, values in parts.items():
        print(f"{name:32s}: {statistics.median(values):7.1f} µs (median of {len(values)} rounds)")


if __name__ == "__main__":
    main()
