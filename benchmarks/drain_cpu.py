"""CPU per job of a ``taskforge worker --burst -c 2`` drain: worker processes plus Redis.

Throughput on a small machine is CPU, so this counts CPU, not only wall time,
from the kernel's accounting: the worker's whole process tree (the supervisor
reaps its children, and this script reaps the supervisor, so
``RUSAGE_CHILDREN`` holds them all) and the Redis server (``INFO cpu``, which
Redis reads from ``getrusage``). Redis is a private ``redis-server`` this
script starts on a free port, so no other client's load is counted.

With ``--base DIR`` (a directory holding another tree's ``taskforge``
package, e.g. ``git archive`` of an older commit) both trees drain, rounds
interleaved, and the ratios are printed: the machine's load drifts, so only
ratios within one run mean anything.

    python benchmarks/drain_cpu.py --jobs 30000 --rounds 3 --base /path/to/old

With ``--huey PYTHON`` (an interpreter whose environment has Huey), each round
also drains the same number of no-op jobs with ``huey_consumer -k process -w
N`` on the same private Redis, and the ratio to Huey is printed.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import redis

from taskforge.broker.keys import QueueKeys

HERE = Path(__file__).resolve().parent
APP = "worker_costs_app:app"  # a no-op task: what is measured is the framework


@dataclass
class Drain:
    tree: str
    jobs: int
    wall_s: float
    worker_cpu_s: float
    redis_cpu_s: float

    @property
    def total_us(self) -> float:
        return (self.worker_cpu_s + self.redis_cpu_s) / self.jobs * 1e6


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_redis(binary: str, workdir: str) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    command = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    proc = subprocess.Popen([*command, "--dir", workdir], stdout=subprocess.DEVNULL)
    url = f"redis://127.0.0.1:{port}/0"
    client = redis.Redis.from_url(url)
    for _ in range(100):
        try:
            client.ping()
            return proc, url
        except redis.ConnectionError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError(f"{binary} did not answer on port {port}")


def env_for(tree: str | None, url: str) -> dict[str, str]:
    """This tree's ``taskforge`` (or ``tree``'s), not whichever one the environment has installed."""
    paths = [str(HERE), tree or str(HERE.parent)]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths), "COSTS_REDIS": url}


def redis_cpu(client: redis.Redis) -> float:
    info = client.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def drain(tree: str | None, url: str, jobs: int, concurrency: int, extra: list[str] | None = None) -> Drain:
    client = redis.Redis.from_url(url)
    client.flushdb()
    code = f"from worker_costs_app import noop\nnoop.delay_many([(i,) for i in range({jobs})])"
    subprocess.run([sys.executable, "-c", code], env=env_for(tree, url), cwd=HERE, check=True)
    command = [sys.executable, "-m", "taskforge", "worker", APP, "--log-level", "warning", *(extra or [])]
    cpu_before, redis_before = children_cpu(), redis_cpu(client)
    began = time.monotonic()
    proc = subprocess.Popen([*command, "--burst", "-c", str(concurrency)], env=env_for(tree, url), cwd=HERE)
    code_ = proc.wait(timeout=1800)
    wall = time.monotonic() - began
    if code_ != 0:
        raise RuntimeError(f"the worker exited {code_}")
    pending = QueueKeys("default").pending
    kind = client.type(pending)
    left = {b"zset": client.zcard, b"list": client.llen}.get(kind, lambda key: 0)(pending)
    if left:
        raise RuntimeError(f"{left} jobs were left pending")
    return Drain(tree or "this tree", jobs, wall, children_cpu() - cpu_before, redis_cpu(client) - redis_before)


HUEY_APP = """
import os
from huey import RedisHuey

huey = RedisHuey("cpu", url=os.environ["CPU_REDIS"])


@huey.task()
def noop(n):
    return None
"""


def drain_huey(python: str, url: str, jobs: int, concurrency: int, workdir: str) -> Drain:
    """The same drain by ``huey_consumer -k process -w N``, from the venv of ``python``.

    Huey has no burst mode: the consumer is stopped (SIGINT, which lets it
    finish what runs) once its queue is empty, the time to notice included.
    """
    client = redis.Redis.from_url(url)
    client.flushdb()
    Path(workdir, "huey_cpu_app.py").write_text(HUEY_APP)
    env = {**os.environ, "CPU_REDIS": url, "PYTHONPATH": workdir}
    code = f"from huey_cpu_app import noop\nfor i in range({jobs}):\n    noop(i)"
    subprocess.run([python, "-c", code], env=env, cwd=workdir, check=True)
    queue = "huey.redis.cpu"
    consumer = str(Path(python).parent / "huey_consumer")
    cpu_before, redis_before = children_cpu(), redis_cpu(client)
    began = time.monotonic()
    proc = subprocess.Popen(
        [consumer, "huey_cpu_app.huey", "-k", "process", "-w", str(concurrency), "-q", "-d", "0.01"],
        env=env,
        cwd=workdir,
    )
    while client.llen(queue):
        time.sleep(0.005)
    wall = time.monotonic() - began
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=60)
    return Drain("huey", jobs, wall, children_cpu() - cpu_before, redis_cpu(client) - redis_before)


def summary(name: str, runs: list[Drain]) -> str:
    total = statistics.median(r.total_us for r in runs)
    worker = statistics.median(r.worker_cpu_s / r.jobs * 1e6 for r in runs)
    redis_us = statistics.median(r.redis_cpu_s / r.jobs * 1e6 for r in runs)
    rate = statistics.median(r.jobs / r.wall_s for r in runs)
    return (
        f"| {name} | {total:.1f} | {worker:.1f} | {redis_us:.1f} | {rate:,.0f} | "
        f"{', '.join(f'{r.total_us:.1f}' for r in runs)} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=30_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("-c", "--concurrency", type=int, default=2)
    parser.add_argument("--base", help="directory holding the taskforge package to compare with")
    parser.add_argument("--redis-server", default=shutil.which("redis-server") or "redis-server")
    parser.add_argument("--this-args", default="", help='more worker options for this tree only, e.g. "--prefetch 1"')
    parser.add_argument("--huey", metavar="PYTHON", help="also drain with Huey, from the venv of this interpreter")
    opts = parser.parse_args()
    trees: list[str | None] = [None] + ([str(Path(opts.base).resolve())] if opts.base else [])
    results: dict[str | None, list[Drain]] = {tree: [] for tree in trees}
    huey: list[Drain] = []
    with tempfile.TemporaryDirectory() as workdir:
        server, url = start_redis(opts.redis_server, workdir)
        try:
            for round_ in range(opts.rounds):
                for tree in trees if round_ % 2 == 0 else reversed(trees):
                    extra = opts.this_args.split() if tree is None else []
                    run = drain(tree, url, opts.jobs, opts.concurrency, extra)
                    results[tree].append(run)
                    line = f"round {round_ + 1} {run.tree}: {run.total_us:.1f} µs CPU/job, {run.wall_s:.1f} s"
                    print(line, flush=True)
                if opts.huey:
                    run = drain_huey(opts.huey, url, opts.jobs, opts.concurrency, workdir)
                    huey.append(run)
                    print(f"round {round_ + 1} huey: {run.total_us:.1f} µs CPU/job, {run.wall_s:.1f} s", flush=True)
        finally:
            server.terminate()
            server.wait(timeout=10)
    print(f"\n{opts.jobs:,} no-op jobs, `worker --burst -c {opts.concurrency}`, median of {opts.rounds}\n")
    print("| tree | CPU µs/job (total) | worker | Redis | jobs/s (wall) | totals per round |")
    print("|---|---|---|---|---|---|")
    for tree, runs in results.items():
        print(summary(tree or "this tree", runs))
    if huey:
        print(summary("huey (`huey_consumer -k process`)", huey))
        mine = statistics.median(r.total_us for r in results[None])
        print(f"\nthis tree / Huey, CPU per job: {mine / statistics.median(r.total_us for r in huey):.3f}")
    if opts.base:
        mine = statistics.median(r.total_us for r in results[None])
        base = statistics.median(r.total_us for r in results[trees[1]])
        print(f"\nthis tree / base, CPU per job: {mine / base:.3f}")


if __name__ == "__main__":
    main()
