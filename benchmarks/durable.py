"""What a durable step and a stream item cost, in Redis time and client time per call.

On a private ``redis-server`` this script starts (so no other client's load
is counted), in this process, through the same calls a worker's run makes
(``current_job().step`` / ``.stream`` inside a claimed job's run):

- a step's first run: the read that finds no stored result (``HGET``) and
  the fenced script that stores it (``store_step``);
- a step replayed by a later run: the read that finds it;
- a stream item: the fenced script that appends it (``stream``: ``XADD`` and
  a count);
- a reader: ``JobHandle.stream()`` reading every item of finished jobs;
- and, apart from the costs, how long after its write a reader in another
  process gets a live item (the target: within 50 ms).

Redis time is the time Redis spent inside those commands (``INFO
commandstats``) and its own CPU (``INFO cpu``: the commands plus reading and
answering them); client time is this process's CPU. Rounds alternate, the
medians are printed, with a plain ``HGET`` through redis-py as a reference
measured in the same rounds (this machine's speed moves). That jobs without steps or streams pay nothing is
measured by ``benchmarks/drain_cpu.py --base <tree before the feature>``
(the plain drain's CPU per job), since the feature only adds a field to a
read the finish already makes.

    python benchmarks/durable.py --jobs 2000 --steps 5 --items 20 --rounds 5
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import redis
from drain_cpu import HERE, redis_cpu, start_redis

from taskforge import TaskForge, current_job
from taskforge.context import enter, leave

QUEUE = "bench"


@dataclass
class Cost:
    calls: int
    client_us: float  # this process's CPU per call
    inside_us: float  # Redis time inside the commands, per call (commandstats)
    redis_us: float  # Redis's own CPU per call (INFO cpu)


def inside_usec(client: redis.Redis) -> float:
    """Redis time inside commands since the last reset, the benchmark's own INFO and CONFIG calls left out."""
    stats = client.info("commandstats")
    return float(sum(v["usec"] for k, v in stats.items() if k not in ("cmdstat_info", "cmdstat_config")))


def measure(client: redis.Redis, calls: int, work: Callable[[], None]) -> Cost:
    client.config_resetstat()
    redis0, client0 = redis_cpu(client), time.process_time()
    work()
    client_s = time.process_time() - client0
    redis_s = redis_cpu(client) - redis0
    return Cost(calls, client_s * 1e6 / calls, inside_usec(client) / calls, redis_s * 1e6 / calls)


@contextmanager
def running(app: TaskForge, claim: Any) -> Iterator[None]:
    token = enter(claim, app.broker.claims, app.broker.steps)
    try:
        yield
    finally:
        leave(token)


def claimed(app: TaskForge, jobs: int) -> list[Any]:
    """``jobs`` jobs of a no-op task, each claimed (a run in progress, as a worker holds it)."""

    @app.task(name="bench.durable", queue=QUEUE)
    def durable() -> None: ...

    durable.delay_many([() for _ in range(jobs)])
    claims: list[Any] = []
    while len(claims) < jobs:
        claims += app.broker.claims.dequeue(QUEUE, 600_000, count=100)[0]
    return claims


RESULT = {"documents": ["queues.md", "redis.md"], "score": 0.93, "model": "pretend-1"}  # a small step result


def run_steps(app: TaskForge, claims: list[Any], steps: int) -> None:
    """Each claimed job's run passes ``steps`` steps (stored by the first call, replayed by later ones)."""
    names = [f"step-{n}" for n in range(steps)]
    for claim in claims:
        with running(app, claim):
            job = current_job()
            for name in names:
                job.step(name, dict, RESULT)


def run_streams(app: TaskForge, claims: list[Any], items: int) -> None:
    """Each claimed job's run streams ``items`` short items."""
    for claim in claims:
        with running(app, claim):
            job = current_job()
            for _ in range(items):
                job.stream("token ")


def read_streams(handles: list[Any]) -> None:
    for handle in handles:
        for _ in handle.stream(timeout=5):
            pass


def one_round(url: str, jobs: int, steps: int, items: int) -> dict[str, Cost]:
    app = TaskForge("bench", broker=url)
    client = redis.Redis.from_url(url)
    client.flushdb()
    claims = claimed(app, jobs)
    costs = {
        "step, first run (HGET + store_step)": measure(client, jobs * steps, lambda: run_steps(app, claims, steps)),
        "step, replayed (HGET)": measure(client, jobs * steps, lambda: run_steps(app, claims, steps)),
        "stream item (stream)": measure(client, jobs * items, lambda: run_streams(app, claims, items)),
    }
    for claim in claims:
        app.broker.claims.succeed(QUEUE, claim.id, claim.token, b"\xc0")
    handles = [app.job(claim.id) for claim in claims[: max(1, jobs // 10)]]
    costs["stream item read (JobHandle.stream)"] = measure(client, len(handles) * items, lambda: read_streams(handles))
    key = f"taskforge:{{{QUEUE}}}:job:{claims[0].id}"
    costs["reference: one HGET through redis-py"] = measure(
        client, jobs * steps, lambda: [client.hget(key, "state") for _ in range(jobs * steps)]
    )
    app.broker.client.close()
    return costs


READER = """
import sys, time
from taskforge import TaskForge
url, job_id, queue = sys.argv[1:4]
app = TaskForge("bench-reader", broker=url)
print("ready", flush=True)
late = [time.time() - item for item in app.job(job_id).stream(timeout=30)]
print(" ".join(f"{x:.6f}" for x in late), flush=True)
"""


def latency(url: str, items: int, gap: float) -> list[float]:
    """Seconds from each item's write to a reader in another process getting it, ``items`` written ``gap`` apart."""
    app = TaskForge("bench", broker=url)
    [claim] = claimed(app, 1)
    reader = subprocess.Popen(
        [sys.executable, "-c", READER, url, claim.id, QUEUE], stdout=subprocess.PIPE, text=True, cwd=HERE
    )
    assert reader.stdout is not None
    reader.stdout.readline()  # imported and connected: its first read is about to block
    time.sleep(0.5)
    with running(app, claim):
        for _ in range(items):
            current_job().stream(time.time())
            time.sleep(gap)
    app.broker.claims.succeed(QUEUE, claim.id, claim.token, b"\xc0")
    out, _ = reader.communicate(timeout=60)
    app.broker.client.close()
    return [float(x) for x in out.split()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--steps", type=int, default=5, help="steps per job")
    parser.add_argument("--items", type=int, default=20, help="stream items per job")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--live-items", type=int, default=500, help="items timed from write to a live reader")
    parser.add_argument("--redis-server", default=shutil.which("redis-server") or "redis-server")
    args = parser.parse_args()
    workdir = tempfile.mkdtemp(prefix="taskforge-durable-bench-")
    proc, url = start_redis(args.redis_server, workdir)
    try:
        rounds = [one_round(url, args.jobs, args.steps, args.items) for _ in range(args.rounds)]
        late = sorted(latency(url, args.live_items, 0.01))
    finally:
        proc.kill()
        proc.wait()
        shutil.rmtree(workdir, ignore_errors=True)
    print(f"{args.jobs} jobs x {args.steps} steps, {args.items} stream items each; medians of {args.rounds} rounds\n")
    print("| call | client CPU µs/call | Redis inside commands µs/call | Redis CPU µs/call |")
    print("|---|---|---|---|")
    for name in rounds[0]:
        costs = [r[name] for r in rounds]
        client_us = statistics.median(c.client_us for c in costs)
        inside_us = statistics.median(c.inside_us for c in costs)
        redis_us = statistics.median(c.redis_us for c in costs)
        print(f"| {name} | {client_us:.1f} | {inside_us:.1f} | {redis_us:.1f} |")
    ms = [x * 1000 for x in late]
    print(
        f"\nA reader in another process (JobHandle.stream), {len(ms)} items written 10 ms apart: "
        f"write to read p50 {statistics.median(ms):.2f} ms, p95 {ms[int(0.95 * (len(ms) - 1))]:.2f} ms, "
        f"max {ms[-1]:.2f} ms (the target: within 50 ms)"
    )


if __name__ == "__main__":
    main()
