"""Response times of the dashboard with 100,000 pending jobs in a queue.

Fills the queue ``bench`` with ``--jobs`` pending jobs (``delay_many`` in
batches), plus a few dead and scheduled ones, starts ``taskforge dashboard``
as its own process, and prints the median and p95 response time over
``--requests`` requests of the overview page, the overview's JSON
(``/api/status``), and pages deep inside the queue. The target is under
200 ms for the overview. Run from the repository root:

    python benchmarks/dashboard.py [--jobs 100000] [--requests 20] [--redis redis://127.0.0.1:6379/12]

The Redis database given is flushed before and after.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import redis

HERE = Path(__file__).resolve().parent
BATCH = 5_000


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def fill(url: str, jobs: int) -> float:
    os.environ["TASKFORGE_BROKER_URL"] = url
    sys.path.insert(0, str(HERE))
    from dashboard_app import app, work

    started = time.perf_counter()
    for first in range(0, jobs, BATCH):
        work.delay_many([(n,) for n in range(first, min(jobs, first + BATCH))])
    for n in range(20):
        work.apply_in(3600 + n, n)
    for n in range(5):  # dead letters, through the queue's own transitions
        app.send("dashboard_app.missing", n)
    for _ in range(5):
        claims, _ = app.broker.claims.dequeue("default", 30_000)
        app.broker.claims.fail("default", claims[0].id, claims[0].token, "UnknownTask: missing", "", None)
    return time.perf_counter() - started


def timed(url: str, requests: int) -> list[float]:
    times = []
    for _ in range(requests + 1):
        started = time.perf_counter()
        with urllib.request.urlopen(url, timeout=30) as response:
            response.read()
            assert response.status == 200, (url, response.status)
        times.append((time.perf_counter() - started) * 1000)
    return times[1:]  # the first request warms up connections and templates


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument("--redis", default=os.environ.get("BENCH_REDIS", "redis://127.0.0.1:6379/12"))
    opts = parser.parse_args()

    client = redis.Redis.from_url(opts.redis)
    client.flushdb()
    seconds = fill(opts.redis, opts.jobs)
    pending = client.zcard("taskforge:{bench}:pending")
    print(f"filled: {pending} pending jobs in queue bench in {seconds:.1f} s")
    port = free_port()
    env = {**os.environ, "TASKFORGE_BROKER_URL": opts.redis, "PYTHONPATH": str(HERE)}
    board = subprocess.Popen(
        [sys.executable, "-m", "taskforge", "dashboard", "dashboard_app:app", "--port", str(port)],
        cwd=HERE,
        env=env,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or board.poll() is not None:
                    raise SystemExit("the dashboard did not start") from None
                time.sleep(0.1)
        last_page = -(-pending // 50)
        for label, path in [
            ("overview page", "/"),
            ("overview API", "/api/status"),
            ("last-hour API", "/api/history"),
            ("pending, page 1", "/queues/bench?state=pending"),
            (f"pending, page {last_page}", f"/queues/bench?state=pending&page={last_page}"),
        ]:
            times = timed(f"http://127.0.0.1:{port}{path}", opts.requests)
            print(
                f"{label:<22} median {statistics.median(times):6.1f} ms   p95 {percentile(times, 0.95):6.1f} ms"
                f"   ({opts.requests} requests, {pending} pending)"
            )
    finally:
        board.send_signal(signal.SIGTERM)
        board.wait(timeout=15)
        client.flushdb()


if __name__ == "__main__":
    main()
