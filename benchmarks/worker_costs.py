"""What a worker costs apart from its jobs: idle Redis commands, start-up time, Python per job.

Runs each measurement on this tree and, with ``--base DIR`` (a directory
holding another tree's ``taskforge`` package, e.g. ``git archive`` of an
older commit), on that tree too, interleaved, and prints the ratios: the
machine's load drifts, so only ratios within one run mean anything.

    python benchmarks/worker_costs.py --redis redis://127.0.0.1:6379/14 --base /path/to/old

* idle: commands/s an idle ``-c 2 -t 8`` worker sends, counted with MONITOR
  (commands run inside Lua scripts are not counted: they are no round trip);
* start: wall time from spawning ``taskforge worker --burst -c 2`` to the
  first job's start (one job queued beforehand), median of ``--rounds``;
* drain: wall time of ``taskforge worker --burst -c 1`` draining ``--jobs``
  no-op jobs, and the jobs/s that makes.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import redis

HERE = Path(__file__).resolve().parent
APP = "worker_costs_app:app"


def env_for(tree: str | None, url: str) -> dict[str, str]:
    paths = [str(HERE)] + ([tree] if tree else [])
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths), "COSTS_REDIS": url}


def worker(tree: str | None, url: str, *args: str) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "taskforge", "worker", APP, "--log-level", "warning", *args]
    return subprocess.Popen(command, env=env_for(tree, url), cwd=HERE)


def enqueue(tree: str | None, url: str, task: str, n: int) -> None:
    code = f"from worker_costs_app import {task}\n{task}.delay_many([(i,) for i in range({n})])"
    subprocess.run([sys.executable, "-c", code], env=env_for(tree, url), cwd=HERE, check=True)


def idle_rate(tree: str | None, url: str, seconds: float) -> float:
    client = redis.Redis.from_url(url)
    client.flushdb()
    proc = worker(tree, url, "-c", "2", "-t", "8")
    try:
        time.sleep(4.0)  # start-up and its first reclaim are not idle cost
        counted = count_commands(url, seconds)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    return counted / seconds


def count_commands(url: str, seconds: float) -> int:
    """Client commands seen by MONITOR for ``seconds`` (lines of Lua-run commands excluded)."""
    conn = redis.Redis.from_url(url).connection_pool.get_connection()
    conn.send_command("MONITOR")
    conn.read_response()
    n = 0
    end = time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0:
        if not conn.can_read(timeout=left):
            break
        line = conn.read_response()
        text = line.decode() if isinstance(line, bytes) else str(line)
        if "lua]" not in text:
            n += 1
    conn.disconnect()
    return n


def start_time(tree: str | None, url: str) -> float:
    client = redis.Redis.from_url(url)
    client.flushdb()
    enqueue(tree, url, "stamp", 1)
    began = time.time()
    proc = worker(tree, url, "-c", "2", "--burst")
    proc.wait(timeout=60)
    first = client.get("costs:first")
    if first is None:
        raise RuntimeError("the job never ran")
    return float(first) - began


def drain_time(tree: str | None, url: str, jobs: int) -> float:
    redis.Redis.from_url(url).flushdb()
    enqueue(tree, url, "noop", jobs)
    began = time.monotonic()
    worker(tree, url, "-c", "1", "--burst").wait(timeout=600)
    return time.monotonic() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--redis", required=True, help="a Redis database this script may flush")
    parser.add_argument("--base", help="directory holding the taskforge package to compare with")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=5000)
    parser.add_argument("--idle-seconds", type=float, default=10.0)
    parser.add_argument("--only", choices=["idle", "start", "drain"], action="append")
    parser.add_argument("--profile", action="store_true", help="cProfile one child draining --jobs in-process")
    args = parser.parse_args()
    if args.profile:
        profile_child(args.redis, args.jobs)
        return
    trees: dict[str, str | None] = {"this": None}
    if args.base:
        trees["base"] = args.base
    report(measure(trees, args))


def measure(trees: dict[str, str | None], args: argparse.Namespace) -> dict[str, dict[str, float]]:
    """Each measure asked for, on each tree, rounds interleaved."""
    only = set(args.only or ["idle", "start", "drain"])
    results: dict[str, dict[str, float]] = {name: {} for name in trees}
    if "idle" in only:
        for name, tree in trees.items():
            results[name]["idle commands/s (-c 2 -t 8)"] = idle_rate(tree, args.redis, args.idle_seconds)
    if "start" in only:
        starts: dict[str, list[float]] = {name: [] for name in trees}
        for _ in range(args.rounds):
            for name, tree in trees.items():
                starts[name].append(start_time(tree, args.redis))
        for name in trees:
            results[name]["start to first job s (-c 2)"] = statistics.median(starts[name])
    if "drain" in only:
        drains: dict[str, list[float]] = {name: [] for name in trees}
        for _ in range(max(1, args.rounds // 2)):
            for name, tree in trees.items():
                drains[name].append(args.jobs / drain_time(tree, args.redis, args.jobs))
        for name in trees:
            results[name][f"drain jobs/s (-c 1, {args.jobs} no-op)"] = statistics.median(drains[name])
    return results


def profile_child(url: str, jobs: int) -> None:
    """Run one child's loop in this process (burst mode) under cProfile: where its Python goes per job."""
    import cProfile
    import multiprocessing
    import pstats

    os.environ["COSTS_REDIS"] = url
    sys.path.insert(0, str(HERE))
    from taskforge.worker.child import Child, ChildConfig

    redis.Redis.from_url(url).flushdb()
    enqueue(None, url, "noop", jobs)
    reader, writer = multiprocessing.Pipe(duplex=False)
    config = ChildConfig(APP, ("default",), 60_000, True, 0, "warning", 0, os.getpid(), report_outcomes=True)
    child = Child(config, writer)

    def drain_pipe() -> None:  # the supervisor's side: read what the child says
        try:
            while True:
                reader.recv()
        except (EOFError, OSError):
            pass

    import threading

    threading.Thread(target=drain_pipe, daemon=True).start()
    profiler = cProfile.Profile()
    began = time.perf_counter()
    profiler.runcall(child.run)
    took = time.perf_counter() - began
    print(f"{jobs} jobs in {took:.2f} s under cProfile ({jobs / took:,.0f} jobs/s)")
    pstats.Stats(profiler).sort_stats("tottime").print_stats(25)


def report(results: dict[str, dict[str, float]]) -> None:
    names = list(results)
    print("| measure | " + " | ".join(names) + (" | this/base |" if "base" in results else " |"))
    print("|---" * (len(names) + 1 + ("base" in results)) + "|")
    for measure in results["this"]:
        row = [f"{results[n][measure]:,.3f}" for n in names]
        if "base" in results:
            row.append(f"{results['this'][measure] / results['base'][measure]:.2f}x")
        print(f"| {measure} | " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
