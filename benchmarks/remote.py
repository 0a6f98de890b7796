"""Drain rate of a worker far from Redis: 2 ms each way (a managed Redis in another zone).

A private ``redis-server`` on a free port, and ``delay_proxy.py`` in front of
it. Each round drains the same no-op jobs (``worker --burst -c 2``, start-up
included) straight to Redis, through the proxy with no delay (what the proxy
alone costs on this machine), and through it with ``--delay-ms`` each way;
the ratios to the straight drain are printed. The jobs are enqueued straight
to Redis: only the worker is far away.

    python benchmarks/remote.py --jobs 30000 --rounds 3 --delay-ms 2
    python benchmarks/remote.py --this-args "--prefetch 1"
"""

from __future__ import annotations

import argparse
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import redis
from drain_cpu import Drain, children_cpu, env_for, free_port, redis_cpu, start_redis

HERE = Path(__file__).resolve().parent


@contextmanager
def proxy(url: str, delay_ms: float) -> Iterator[str]:
    """The URL of a delaying proxy in front of the Redis at ``url``, while in the block."""
    port = free_port()
    target = url.split("//")[1].split("/")[0]
    command = [sys.executable, str(HERE / "delay_proxy.py"), "--listen", str(port), "--to", target]
    proc = subprocess.Popen([*command, "--delay-ms", str(delay_ms)])
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.05)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def drain(near: str, far: str, jobs: int, concurrency: int, extra: list[str]) -> Drain:
    """Enqueue ``jobs`` no-op jobs at ``near``, then time a burst worker connected to ``far``."""
    client = redis.Redis.from_url(near)
    client.flushdb()
    code = f"from worker_costs_app import noop\nnoop.delay_many([(i,) for i in range({jobs})])"
    subprocess.run([sys.executable, "-c", code], env=env_for(None, near), cwd=HERE, check=True)
    command = [sys.executable, "-m", "taskforge", "worker", "worker_costs_app:app", "--log-level", "warning"]
    cpu_before, redis_before = children_cpu(), redis_cpu(client)
    began = time.monotonic()
    proc = subprocess.Popen([*command, *extra, "--burst", "-c", str(concurrency)], env=env_for(None, far), cwd=HERE)
    if proc.wait(timeout=1800) != 0:
        raise RuntimeError(f"the worker exited {proc.returncode}")
    wall = time.monotonic() - began
    if client.zcard("taskforge:{default}:pending"):
        raise RuntimeError("jobs were left pending")
    return Drain(far, jobs, wall, children_cpu() - cpu_before, redis_cpu(client) - redis_before)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=30_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("-c", "--concurrency", type=int, default=2)
    parser.add_argument("--delay-ms", type=float, default=2.0, help="added each way by the proxy (default 2)")
    parser.add_argument("--this-args", default="", help='more worker options, e.g. "--prefetch 1"')
    parser.add_argument("--redis-server", default=shutil.which("redis-server") or "redis-server")
    opts = parser.parse_args()
    extra = opts.this_args.split()
    shapes = {"straight": None, "proxy, 0 ms": 0.0, f"proxy, {opts.delay_ms:g} ms each way": opts.delay_ms}
    rates: dict[str, list[float]] = {name: [] for name in shapes}
    with tempfile.TemporaryDirectory() as workdir:
        server, url = start_redis(opts.redis_server, workdir)
        try:
            for round_ in range(opts.rounds):
                for name, delay in shapes.items():
                    if delay is None:
                        run = drain(url, url, opts.jobs, opts.concurrency, extra)
                    else:
                        with proxy(url, delay) as far:
                            run = drain(url, far, opts.jobs, opts.concurrency, extra)
                    rates[name].append(run.jobs / run.wall_s)
                    print(f"round {round_ + 1} {name}: {run.jobs / run.wall_s:,.0f} jobs/s", flush=True)
        finally:
            server.terminate()
            server.wait(timeout=10)
    straight = statistics.median(rates["straight"])
    print(f"\n{opts.jobs:,} no-op jobs, `worker --burst -c {opts.concurrency} {opts.this_args}`".rstrip() + ", median")
    print(f"of {opts.rounds} rounds, start-up included\n")
    print("| Redis | jobs/s | to straight |")
    print("|---|---|---|")
    for name, runs in rates.items():
        rate = statistics.median(runs)
        print(f"| {name} | {rate:,.0f} | {rate / straight:.2f}x |")


if __name__ == "__main__":
    main()
