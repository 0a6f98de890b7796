"""What fair turns between keys cost: a keyed drain against a keyless one, and many keys against few.

Two measurements, each on a private ``redis-server`` this script starts (so
no other client's load is counted), rounds interleaved, medians printed:

1. Drain rate: N no-op jobs without a key, then N spread over K keys (N/K
   jobs per key, each key's jobs enqueued together, the shape of one
   customer's burst after another's), drained by ``taskforge worker --burst
   -c 2``. The rate is read from the jobs' own records (first start to last
   finish, Redis's clock), so worker start-up is not in it; CPU per job
   (worker processes plus Redis, from the kernel's accounting) includes it.
2. Redis time per job of the claim with many keys holding jobs against few:
   M jobs over M keys (one each) and M jobs over 10 keys, drained the same
   way; Redis's CPU and its scripts' time (``INFO commandstats``) per job.

    python benchmarks/fairness.py --jobs 10000 --keys 1000 --many 100000 --rounds 3
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

import redis
from drain_cpu import HERE, children_cpu, env_for, redis_cpu, start_redis

APP = "worker_costs_app:app"


@dataclass
class Run:
    shape: str
    jobs: int
    rate: float  # jobs/s, first start to last finish
    cpu_us: float  # worker + Redis CPU per job, start-up included
    redis_us: float  # Redis CPU per job
    script_us: float  # Redis time inside EVALSHA per job


def script_usec(client: redis.Redis) -> float:
    stats = client.info("commandstats")
    return float(sum(v["usec"] for k, v in stats.items() if k in ("cmdstat_evalsha", "cmdstat_eval")))


def enqueue(url: str, jobs: int, keys: int) -> None:
    """``jobs`` no-op jobs, keyless when ``keys`` is 0, else ``jobs // keys`` per key, each key's together."""
    per = max(1, jobs // keys) if keys else 0
    batch = f"range(start, min(start + 10000, {jobs}))"
    if keys:
        call = f"keyed.delay_many([(i, str(i // {per})) for i in {batch}])"
    else:
        call = f"noop.delay_many([(i,) for i in {batch}])"
    code = f"from worker_costs_app import keyed, noop\nfor start in range(0, {jobs}, 10000):\n    {call}"
    subprocess.run([sys.executable, "-c", code], env=env_for(None, url), cwd=HERE, check=True)


def span_s(client: redis.Redis) -> float:
    """First start to last finish over every job record (ms fields, Redis's clock)."""
    starts, ends = [], []
    keys = list(client.scan_iter(match="taskforge:{default}:job:*", count=5000))
    for i in range(0, len(keys), 5000):
        pipe = client.pipeline(transaction=False)
        for key in keys[i : i + 5000]:
            pipe.hmget(key, "started_at", "finished_at")
        for started, finished in pipe.execute():
            starts.append(int(started))
            ends.append(int(finished))
    return (max(ends) - min(starts)) / 1000


def drain(url: str, shape: str, jobs: int, keys: int) -> Run:
    client = redis.Redis.from_url(url)
    client.flushdb()
    client.config_resetstat()
    enqueue(url, jobs, keys)
    cpu_before, redis_before, script_before = children_cpu(), redis_cpu(client), script_usec(client)
    command = [sys.executable, "-m", "taskforge", "worker", APP, "--log-level", "warning", "--burst", "-c", "2"]
    code = subprocess.run(command, env=env_for(None, url), cwd=HERE, timeout=1800).returncode
    if code != 0:
        raise RuntimeError(f"the worker exited {code}")
    worker_cpu = children_cpu() - cpu_before
    redis_used = redis_cpu(client) - redis_before
    scripts = script_usec(client) - script_before
    left = client.hgetall("taskforge:{default}:lane_jobs").values()
    if client.zcard("taskforge:{default}:pending") or any(int(n) for n in left):
        raise RuntimeError("jobs were left pending")
    return Run(
        shape,
        jobs,
        jobs / span_s(client),
        (worker_cpu + redis_used) / jobs * 1e6,
        redis_used / jobs * 1e6,
        scripts / jobs,
    )


def table(runs: dict[str, list[Run]]) -> list[str]:
    lines = [
        "| shape | jobs/s (first start to last finish) | CPU µs/job (worker + Redis) | Redis CPU µs/job "
        "| script µs/job | rates per round |",
        "|---|---|---|---|---|---|",
    ]
    for shape, rs in runs.items():
        med = {f: statistics.median(getattr(r, f) for r in rs) for f in ("rate", "cpu_us", "redis_us", "script_us")}
        lines.append(
            f"| {shape} | {med['rate']:,.0f} | {med['cpu_us']:.1f} | {med['redis_us']:.1f} | {med['script_us']:.1f} "
            f"| {', '.join(f'{r.rate:,.0f}' for r in rs)} |"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=10_000, help="jobs per drain of the rate comparison")
    parser.add_argument("--keys", type=int, default=1_000, help="keys the keyed drain spreads them over")
    parser.add_argument("--many", type=int, default=100_000, help="jobs (and keys) of the many-keys drain")
    parser.add_argument("--few", type=int, default=10, help="keys of the few-keys drain of as many jobs")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--redis-server", default=shutil.which("redis-server") or "redis-server")
    opts = parser.parse_args()
    shapes = {
        "keyless": (opts.jobs, 0),
        f"{opts.keys:,} keys": (opts.jobs, opts.keys),
        f"{opts.many:,} keys": (opts.many, opts.many),
        f"{opts.few:,} keys, {opts.many:,} jobs": (opts.many, opts.few),
    }
    runs: dict[str, list[Run]] = {shape: [] for shape in shapes}
    with tempfile.TemporaryDirectory() as workdir:
        server, url = start_redis(opts.redis_server, workdir)
        try:
            for round_ in range(opts.rounds):
                order = list(shapes.items())
                for shape, (jobs, keys) in order if round_ % 2 == 0 else reversed(order):
                    run = drain(url, shape, jobs, keys)
                    runs[shape].append(run)
                    print(
                        f"round {round_ + 1} {shape}: {run.rate:,.0f} jobs/s, {run.cpu_us:.1f} µs CPU/job, "
                        f"Redis {run.redis_us:.1f} µs/job (scripts {run.script_us:.1f})",
                        flush=True,
                    )
                    time.sleep(0.5)
        finally:
            server.terminate()
            server.wait(timeout=10)
    print("\n`taskforge worker --burst -c 2`, no-op tasks, medians of", opts.rounds, "rounds\n")
    print("\n".join(table(runs)))
    rate = {shape: statistics.median(r.rate for r in rs) for shape, rs in runs.items()}
    redis_us = {shape: statistics.median(r.redis_us for r in rs) for shape, rs in runs.items()}
    scripts = {shape: statistics.median(r.script_us for r in rs) for shape, rs in runs.items()}
    keyed, many, few = list(shapes)[1:]
    print(f"\n{keyed} / keyless, drain rate: {rate[keyed] / rate['keyless']:.3f}")
    print(f"{many} / {few}, Redis CPU per job: {redis_us[many] / redis_us[few]:.3f}")
    print(f"{many} / {few}, script time per job: {scripts[many] / scripts[few]:.3f}")
    # The machine's load drifts between rounds: each round's two shapes ran one after the
    # other, so the median of the rounds' own ratios is the steadier figure.
    for label, num, den, field in (
        (f"{keyed} / keyless, drain rate", keyed, "keyless", "rate"),
        (f"{many} / {few}, Redis CPU per job", many, few, "redis_us"),
    ):
        ratios = [getattr(a, field) / getattr(b, field) for a, b in zip(runs[num], runs[den], strict=True)]
        listed = ", ".join(f"{r:.3f}" for r in ratios)
        print(f"{label}, median of the rounds' own ratios: {statistics.median(ratios):.3f} ({listed})")


if __name__ == "__main__":
    main()
