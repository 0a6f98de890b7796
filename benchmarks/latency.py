"""Idle-worker latency and idle CPU of ``taskforge worker``.

Prints the median and p99 time from the start of a ``.delay()`` call to the
start of the task, over N jobs sent one at a time (each after the previous
one started), and the CPU time the whole worker (supervisor and children)
uses while idle for a while. Run from the repository root:

    python benchmarks/latency.py [--jobs 300] [--idle 10] [--threads 8] [--redis redis://127.0.0.1:6379/12]

The worker runs this checkout's taskforge (the repository root goes first on
its PYTHONPATH), not whichever copy is installed, so a change is measured
before it is installed. ``--threads`` gives the children that many lanes
(``-c 2 -t 8`` is the shape ``benchmarks/run.py`` measures beside ``-c 2``).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import redis

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process and its children (from /proc, Linux)."""
    total = 0.0
    pids = [pid]
    try:
        pids += [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        pass
    for p in pids:
        try:
            stat = Path(f"/proc/{p}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        total += (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
    return total


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=300)
    parser.add_argument("--idle", type=float, default=10.0)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1, help="lanes per child (-t)")
    parser.add_argument("--redis", default=os.environ.get("BENCH_REDIS", "redis://127.0.0.1:6379/12"))
    opts = parser.parse_args()

    side = redis.Redis.from_url(opts.redis)
    side.flushdb()
    path = os.pathsep.join([str(REPO), str(HERE)])
    env = {**os.environ, "TASKFORGE_BROKER_URL": opts.redis, "BENCH_SIDE_REDIS": opts.redis, "PYTHONPATH": path}
    worker = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "taskforge",
            "worker",
            "latency_app:app",
            "-c",
            str(opts.concurrency),
            "-t",
            str(opts.threads),
            "--log-level",
            "warning",
        ],
        cwd=HERE,
        env=env,
        start_new_session=True,
    )
    sys.path[:0] = [str(REPO), str(HERE)]
    os.environ.setdefault("BENCH_SIDE_REDIS", opts.redis)
    os.environ["TASKFORGE_BROKER_URL"] = opts.redis
    import latency_app

    try:
        latency_app.stamp.delay(-1)  # warm-up: wait for the children to come up
        side.blpop(["bench:started"], timeout=60)
        time.sleep(1.0)
        latencies = []
        for n in range(opts.jobs):
            begin = time.time()
            latency_app.stamp.delay(n)
            _, raw = side.blpop(["bench:started"], timeout=10)
            started = float(raw.decode().split()[1])
            latencies.append((started - begin) * 1000)
        time.sleep(2.0)  # let the last lease renewals and reclaim passes settle
        before = cpu_seconds(worker.pid)
        time.sleep(opts.idle)
        idle_cpu = cpu_seconds(worker.pid) - before
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(30)
        side.flushdb()

    result = {
        "jobs": opts.jobs,
        "concurrency": opts.concurrency,
        "threads": opts.threads,
        "delay_to_start_ms_p50": round(statistics.median(latencies), 3),
        "delay_to_start_ms_p99": round(percentile(latencies, 0.99), 3),
        "delay_to_start_ms_max": round(max(latencies), 3),
        "idle_seconds": opts.idle,
        "idle_cpu_seconds": round(idle_cpu, 3),
        "idle_cpu_percent": round(100 * idle_cpu / opts.idle, 2),
    }
    print(json.dumps(result))
    print(
        f"-c {opts.concurrency} -t {opts.threads}, delay() -> task start over {opts.jobs} jobs: "
        f"median {result['delay_to_start_ms_p50']:.2f} ms, "
        f"p99 {result['delay_to_start_ms_p99']:.2f} ms; idle worker CPU over {opts.idle:g} s: "
        f"{result['idle_cpu_seconds']:.3f} s ({result['idle_cpu_percent']:.2f}% of one core)"
    )


if __name__ == "__main__":
    main()
