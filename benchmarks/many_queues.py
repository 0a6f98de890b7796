"""``taskforge status`` and the dashboard's overview over thousands of one-off queues.

Starts a private ``redis-server`` on a free loopback port and fills it with
``--queues`` one-off queues, each used once: a job sent and run to success
(claimed and recorded through the queue's own scripts, as a worker would),
so each queue keeps a finished record and a minute of stats; ``--purged``
sends one job to each and purges it instead. Then times, each ``--rounds``
times, ``taskforge status APP`` (a real process) and ``GET /`` of a real
``taskforge dashboard`` process, with the code of ``--tree`` (default: this
checkout), so a tree before a change and one after can be compared on the
same data:

    python benchmarks/many_queues.py [--queues 5000] [--purged] [--rounds 3] [--tree PATH]
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
APP = """
from taskforge import TaskForge

app = TaskForge("manyq")


@app.task
def one(n):
    return n
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait(predicate: Callable[[], object], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if predicate():
                return
        except OSError:
            pass
        time.sleep(0.1)
    raise SystemExit(f"timed out waiting for {what}")


def fill(url: str, queues: int, purged: bool) -> None:
    sys.path.insert(0, str(ROOT))
    from taskforge import TaskForge
    from taskforge.serialization import dumps_result

    app = TaskForge("filler", broker=url)
    one = app.task(name="manyq.one")(lambda n: n)
    for i in range(queues):
        name = f"oneoff-{i}"
        one.with_options(queue=name).delay(i)
        if purged:
            app.broker.cleanup.purge(name, "pending")
            continue
        (claim,), _ = app.broker.claims.dequeue(name, 60_000)
        app.broker.claims.succeed(name, claim.id, claim.token, dumps_result(i))
    app.broker.claims.tally.flush_outcomes()  # the successes counted here, written as a worker would


def timed_status(env: dict[str, str], cwd: str) -> float:
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "taskforge", "status", "manyq:app"],
        cwd=cwd,
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return time.perf_counter() - started


def timed_overview(port: int) -> float:
    started = time.perf_counter()
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=600) as response:
        response.read()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--queues", type=int, default=5000)
    parser.add_argument("--purged", action="store_true", help="one job sent to each queue, then purged")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tree", default=str(ROOT), help="the checkout whose taskforge status and dashboard run")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as workdir:
        port = free_port()
        url = f"redis://127.0.0.1:{port}/0"
        server = subprocess.Popen(
            ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--dir", workdir],
            stdout=subprocess.DEVNULL,
        )
        dashboard = None
        try:
            import redis

            wait(lambda: redis.Redis(port=port).ping(), 10, "redis-server")
            started = time.perf_counter()
            fill(url, args.queues, args.purged)
            print(
                f"filled {args.queues} one-off queues in {time.perf_counter() - started:.1f} s "
                f"({redis.Redis(port=port).dbsize()} keys)"
            )
            Path(workdir, "manyq.py").write_text(APP)
            env = {**os.environ, "TASKFORGE_BROKER_URL": url, "PYTHONPATH": f"{workdir}{os.pathsep}{args.tree}"}
            status = [timed_status(env, workdir) for _ in range(args.rounds)]
            web = free_port()
            dashboard = subprocess.Popen(
                [sys.executable, "-m", "taskforge", "dashboard", "manyq:app", "--port", str(web)],
                cwd=workdir,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            wait(
                lambda: urllib.request.urlopen(f"http://127.0.0.1:{web}/static/dashboard.css", timeout=5),
                60,
                "the dashboard",
            )
            overview = [timed_overview(web) for _ in range(args.rounds)]
            print(
                f"taskforge status: median {statistics.median(status):.2f} s ({', '.join(f'{s:.2f}' for s in status)})"
            )
            print(
                f"dashboard GET /:  median {statistics.median(overview):.2f} s "
                f"({', '.join(f'{s:.2f}' for s in overview)})"
            )
        finally:
            if dashboard is not None:
                dashboard.terminate()
                dashboard.wait(10)
            server.terminate()
            server.wait(10)


if __name__ == "__main__":
    main()
