"""Drain throughput of twenty queues: one Redis node against a 3-master Redis Cluster.

Starts its own servers on free loopback ports (a single ``redis-server``, and
a 3-master/3-replica cluster through the test suite's harness,
``tests/scaled/servers.py``; and the same cluster without replicas, to
tell the cost of sharding from that of replication), fills twenty queues with N trivial jobs, and
times ``--workers`` burst workers (``taskforge worker --burst``) draining
them, from start until the last one exits; and the same on the cluster with
``durability="replicated"``, whose cost it also measures on single
``.delay()`` calls. Each measure is the median of ``--rounds`` rounds that
alternate between the setups. Run from the repository root:

    python benchmarks/cluster.py [--jobs 3000] [--workers 3] [--concurrency 1] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from contextlib import ExitStack
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

from tests.scaled.servers import HOST, Cluster, Servers, free_ports  # noqa: E402


def fill(url: str, jobs: int) -> None:
    os.environ["TASKFORGE_BROKER_URL"] = url
    import cluster_app

    cluster_app.app.reset_connection()
    cluster_app.app.url = url
    per_queue = jobs // len(cluster_app.QUEUES)
    for queue in cluster_app.QUEUES:
        task = cluster_app.noop.with_options(queue=queue)
        for start in range(0, per_queue, 500):
            task.delay_many([(n,) for n in range(start, min(per_queue, start + 500))])


def drain(url: str, workers: int, concurrency: int, durability: str = "async") -> float:
    """Seconds for ``workers`` burst workers to empty the queues."""
    import cluster_app

    env = {**os.environ, "TASKFORGE_BROKER_URL": url, "BENCH_DURABILITY": durability, "PYTHONPATH": str(HERE)}
    queues = [arg for q in cluster_app.QUEUES for arg in ("-q", q)]
    started = time.monotonic()
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "taskforge",
                "worker",
                "cluster_app:app",
                "--burst",
                "-c",
                str(concurrency),
                "--log-level",
                "warning",
                "--no-periodic",
                *queues,
            ],
            cwd=HERE,
            env=env,
        )
        for _ in range(workers)
    ]
    for proc in procs:
        if proc.wait(timeout=600) != 0:
            raise SystemExit(f"a worker exited with {proc.returncode}")
    return time.monotonic() - started


def delays_per_second(url: str, durability: str, n: int = 1000) -> float:
    from taskforge import TaskForge

    app = TaskForge("bench-delay", broker=url, durability=durability)
    task = app.task(name="bench.delay", queue="bench-delay")(lambda n: n)
    task.delay(-1)
    started = time.monotonic()
    for i in range(n):
        task.delay(i)
    elapsed = time.monotonic() - started
    app.broker.cleanup.clear("bench-delay")
    return n / elapsed


def report(setups: dict[str, tuple[str, str]], opts: argparse.Namespace) -> None:
    # Alternating rounds, median of each: the machine's load drifts.
    rates: dict[str, list[float]] = {name: [] for name in setups}
    for _ in range(opts.rounds):
        for name, (url, durability) in setups.items():
            fill(url, opts.jobs)
            rates[name].append(opts.jobs / drain(url, opts.workers, opts.concurrency, durability))
    drained = {name: statistics.median(found) for name, found in rates.items()}
    for name, rate in drained.items():
        print(
            f"{name}: {opts.jobs} jobs over 20 queues drained by {opts.workers} workers "
            f"(-c {opts.concurrency}) at {rate:,.0f} jobs/s (rounds: "
            f"{', '.join(f'{r:,.0f}' for r in rates[name])})"
        )
    one_node, sharded, spread, safe_drain = drained.values()
    print(
        f"cluster / single node drain throughput: {spread / one_node:.2f} ({sharded / one_node:.2f} without replicas)"
    )
    print(f"replicated / async drain throughput on the cluster: {safe_drain / spread:.2f}")

    cluster_url = setups["3-master cluster, 1 replica each"][0]
    delays: dict[str, list[float]] = {"async": [], "replicated": []}
    for _ in range(opts.rounds):
        for durability, found in delays.items():
            found.append(delays_per_second(cluster_url, durability))
    fast, safe = (statistics.median(found) for found in delays.values())
    print(
        f"3-master cluster, single .delay() calls: {fast:,.0f}/s async, {safe:,.0f}/s replicated "
        f"({safe / fast:.2f} of async)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=3000)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=3)
    opts = parser.parse_args()

    with ExitStack() as servers:  # every server stopped, whatever fails
        single = Servers("bench-single")
        servers.callback(single.stop)
        (port,) = free_ports(1)
        single.start(port, ["--port", str(port), "--bind", HOST, "--save", "", "--appendonly", "no"])
        single.wait_up(port)
        cluster = Cluster()
        servers.callback(cluster.stop)
        bare = Cluster(replicas=0)
        servers.callback(bare.stop)
        report(
            {
                "1 node": (f"redis://{HOST}:{port}/0", "async"),
                "3-master cluster, no replicas": (bare.url, "async"),
                "3-master cluster, 1 replica each": (cluster.url, "async"),
                "3-master cluster, 1 replica each, durability='replicated'": (cluster.url, "replicated"),
            },
            opts,
        )


if __name__ == "__main__":
    main()
