"""The embedded development broker (fakeredis over TCP) against a bundled real server, on the same loop.

For each broker: the wall time of ``taskforge demo``'s run (the worker, a
few hundred jobs, the summary), the enqueue rate of one producer (N
``delay()`` calls), and the drain rate of ``taskforge worker -c 2`` on N
queued no-op jobs. Decides whether ``taskforge broker`` / ``taskforge demo``
should start a bundled server instead of fakeredis (see docs/servers.md).
Run from the repository root:

    python benchmarks/embedded.py [--server PATH] [--jobs 2000]

Without ``--server``: the bundled Valkey 9 under ``$TASKFORGE_TEST_SERVERS``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import redis
from servers import start_server

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
TASK = "latency_app.stamp"


@contextlib.contextmanager
def broker(kind: str, binary: str) -> Iterator[str]:
    """A URL served by the embedded fakeredis broker or by ``binary``, stopped on exit."""
    if kind == "embedded":
        from taskforge.devbroker import DevBroker

        with DevBroker(port=0) as dev:
            yield dev.url
        return
    with tempfile.TemporaryDirectory(prefix="tf-embedded-") as workdir:
        server, url = start_server(binary, workdir)
        try:
            yield url
        finally:
            server.terminate()
            server.wait(15)


def demo_seconds(url: str) -> float:
    """Wall time of the demo's whole run on ``url``, its output swallowed."""
    from taskforge.cli.demo import run

    begin = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp, contextlib.redirect_stdout(io.StringIO()):
        run(url, Path(tmp) / "worker.log")
    return time.perf_counter() - begin


def enqueue_rate(url: str, jobs: int) -> float:
    """Jobs/s of one producer sending ``jobs`` jobs one call at a time."""
    from taskforge import TaskForge

    producer = TaskForge("bench", broker=url)
    producer.broker.ping()  # connect (and check the server) before the clock starts
    producer.broker.client.flushdb()
    begin = time.perf_counter()
    for n in range(jobs):
        producer.send(TASK, n)
    return jobs / (time.perf_counter() - begin)


def drain_rate(url: str, jobs: int) -> float:
    """Jobs/s of a 2-child worker on ``jobs`` jobs queued before it started (enqueued by enqueue_rate)."""
    side = redis.Redis.from_url(url)
    env = {**os.environ, "TASKFORGE_BROKER_URL": url, "BENCH_SIDE_REDIS": url, "PYTHONPATH": str(HERE)}
    argv = [sys.executable, "-m", "taskforge", "worker", "latency_app:app", "-c", "2", "--log-level", "warning"]
    begin = time.perf_counter()
    worker = subprocess.Popen(argv, cwd=HERE, env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while side.llen("bench:started") < jobs:
            if time.monotonic() > deadline or worker.poll() is not None:
                raise SystemExit(f"drain did not finish: {side.llen('bench:started')} of {jobs}")
            time.sleep(0.02)
        return jobs / (time.perf_counter() - begin)
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(30)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", help="a redis-server or valkey-server binary")
    parser.add_argument("--jobs", type=int, default=2000)
    opts = parser.parse_args()
    binary = opts.server
    if binary is None:
        sys.path.insert(0, str(ROOT))
        from tests.servers.bundled import bundled

        binary = bundled().get("valkey-9") or sys.exit("no bundled Valkey 9: set TASKFORGE_TEST_SERVERS or --server")
    sys.path.insert(0, str(HERE))
    for kind in ("embedded", "bundled"):
        with broker(kind, binary) as url:
            os.environ["BENCH_SIDE_REDIS"] = url
            figures = {"broker": kind if kind == "embedded" else f"bundled {Path(binary).name}"}
            figures["demo_s"] = round(demo_seconds(url), 2)
            redis.Redis.from_url(url).flushdb()
            figures["enqueue_per_s"] = round(enqueue_rate(url, opts.jobs))
            figures["drain_per_s"] = round(drain_rate(url, opts.jobs))
            print(json.dumps(figures), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
