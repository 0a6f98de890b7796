"""Scheduled-job lateness and short ``result()`` timeouts on a given Redis or Valkey server binary.

Starts the server on a free loopback port (no persistence), a ``taskforge
worker -c 1``, then schedules N jobs with ``apply_in(U(0.3, 20 s))`` and
measures how late each starts (task start minus due time); then times
``result(timeout=0.001)`` on a job nobody runs, which must raise
``TimeoutError`` at once. Redis 6.2 is the server where both once failed
(a 1 ms blocking timeout meant "forever" there). Run from the repository root:

    python benchmarks/servers.py [--server PATH ...] [--jobs 400] [--spread 0.3 20]

Without ``--server``: the bundled Redis 6.2 under ``$TASKFORGE_TEST_SERVERS``
(see ``python -m tests.servers.matrix install``). Exits 1 if a job started
more than 150 ms late or a ``result()`` took more than 100 ms.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import redis

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
MAX_LATE_MS = 150.0
MAX_RESULT_MS = 100.0


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def start_server(binary: str, workdir: str) -> tuple[subprocess.Popen[bytes], str]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    argv = [binary, "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--appendonly", "no", "--dir", workdir]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        try:
            redis.Redis(port=port).ping()
            return proc, f"redis://127.0.0.1:{port}/0"
        except redis.ConnectionError:
            time.sleep(0.05)
    proc.kill()
    raise SystemExit(f"{binary} did not answer within 15 s")


def scheduled_lateness(url: str, jobs: int, spread: tuple[float, float]) -> list[float]:
    """Lateness (ms) of each of ``jobs`` jobs scheduled U(spread) seconds ahead, on one worker child."""
    env = {**os.environ, "TASKFORGE_BROKER_URL": url, "BENCH_SIDE_REDIS": url, "PYTHONPATH": str(HERE)}
    argv = [sys.executable, "-m", "taskforge", "worker", "latency_app:app", "-c", "1", "--log-level", "warning"]
    worker = subprocess.Popen(argv, cwd=HERE, env=env, start_new_session=True)
    os.environ.update(TASKFORGE_BROKER_URL=url, BENCH_SIDE_REDIS=url)
    sys.path.insert(0, str(HERE))
    import latency_app

    side = redis.Redis.from_url(url)
    try:
        latency_app.stamp.delay(-1)  # the child is up once this ran
        if side.blpop(["bench:started"], timeout=60) is None:
            raise SystemExit("the worker did not start within 60 s")
        due = {}
        rng = random.Random(21)
        for n in range(jobs):
            delay = rng.uniform(*spread)
            due[n] = time.time() + delay
            latency_app.stamp.apply_in(delay, n)
        late = []
        deadline = time.monotonic() + spread[1] + 60
        while len(late) < jobs and time.monotonic() < deadline:
            popped = side.blpop(["bench:started"], timeout=5)
            if popped is not None:
                n_text, started = popped[1].decode().split()
                late.append((float(started) - due[int(n_text)]) * 1000)
        if len(late) < jobs:
            raise SystemExit(f"only {len(late)} of {jobs} jobs started within {spread[1] + 60:g} s")
        return late
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(30)


def short_result_waits(url: str, rounds: int) -> list[float]:
    """Seconds each ``result(timeout=0.001)`` took to raise TimeoutError (no worker serves the queue)."""
    from taskforge import TaskForge

    handle = TaskForge("bench-result", broker=url).send("nobody.runs.this")  # no worker runs by now
    took = []
    for _ in range(rounds):
        begin = time.perf_counter()
        try:
            handle.result(timeout=0.001)
        except TimeoutError:
            took.append((time.perf_counter() - begin) * 1000)
        else:
            raise SystemExit("result() returned a value for a job nobody runs")
    return took


def server_version(url: str) -> str:
    info = redis.Redis.from_url(url).info("server")
    name = "valkey" if "valkey_version" in info else "redis"
    return f"{name} {info.get('valkey_version', info['redis_version'])}"


def measure(binary: str, jobs: int, spread: tuple[float, float], rounds: int) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="tf-bench-") as workdir:
        server, url = start_server(binary, workdir)
        try:
            version = server_version(url)
            late = scheduled_lateness(url, jobs, spread)
            waits = short_result_waits(url, rounds)
        finally:
            server.terminate()
            server.wait(15)
    return {
        "server": version,
        "jobs": jobs,
        "late_ms_median": round(statistics.median(late), 1),
        "late_ms_p99": round(percentile(late, 0.99), 1),
        "late_ms_max": round(max(late), 1),
        "late_over_150ms": sum(1 for ms in late if ms > MAX_LATE_MS),
        "result_timeout_rounds": rounds,
        "result_timeout_ms_median": round(statistics.median(waits), 1),
        "result_timeout_ms_max": round(max(waits), 1),
    }


def default_server() -> list[str]:
    sys.path.insert(0, str(ROOT))
    from tests.servers.bundled import bundled

    found = bundled().get("redis-6.2")
    if found is None:
        raise SystemExit("no bundled Redis 6.2: set TASKFORGE_TEST_SERVERS or pass --server")
    return [found]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", action="append", help="a redis-server or valkey-server binary (repeatable)")
    parser.add_argument("--jobs", type=int, default=400)
    parser.add_argument("--spread", type=float, nargs=2, default=(0.3, 20.0), metavar=("MIN", "MAX"))
    parser.add_argument("--result-rounds", type=int, default=50)
    parser.add_argument("--only", help=argparse.SUPPRESS)
    opts = parser.parse_args()
    servers = opts.server or default_server()
    if len(servers) > 1 and not opts.only:  # a process per server: the app binds to its broker on import
        codes = [subprocess.run([sys.executable, __file__, *sys.argv[1:], "--only", b]).returncode for b in servers]
        return max(codes)
    ok = True
    for binary in [opts.only] if opts.only else servers:
        result = measure(binary, opts.jobs, tuple(opts.spread), opts.result_rounds)
        print(json.dumps(result))
        print(
            f"{result['server']}: {opts.jobs} apply_in(U({opts.spread[0]:g}, {opts.spread[1]:g} s)) jobs on one "
            f"child started late by median {result['late_ms_median']} ms, p99 {result['late_ms_p99']} ms, "
            f"max {result['late_ms_max']} ms; result(timeout=0.001) raised TimeoutError after median "
            f"{result['result_timeout_ms_median']} ms, max {result['result_timeout_ms_max']} ms",
            flush=True,
        )
        ok = ok and result["late_ms_max"] <= MAX_LATE_MS and result["result_timeout_ms_max"] <= MAX_RESULT_MS
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
