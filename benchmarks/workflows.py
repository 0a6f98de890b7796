"""What workflow bookkeeping costs: workflows against the same number of plain jobs, and the gap between steps.

    python benchmarks/workflows.py --redis redis://127.0.0.1:6379/14
    python benchmarks/workflows.py --redis URL --shapes chains --gaps 0 --rounds 5

* chains: 2,000 chains of 3 no-op steps drained by ``taskforge worker -c 2
  --burst``, against 6,000 plain no-op jobs drained the same way;
* chord: a group of 10,000 no-op members followed by one no-op step, against
  10,001 plain no-op jobs;
* gap: on an idle ``-c 2`` worker, from the end of a chain's first step (its
  return) to the start of the second (the second computes it), over
  ``--gaps`` chains sent one after another.

Everything is stored before the worker starts (the drain is what is timed;
the producer's time is printed apart). Rounds alternate plain and workflow,
so the machine's drift touches both; the ratio is what to read.
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
from redis.utils import HIREDIS_AVAILABLE

HERE = Path(__file__).resolve().parent
APP = "workflows_app:app"


def env(url: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(HERE), "FLOWS_REDIS": url}


def worker(url: str, *args: str) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "taskforge", "worker", APP, "--log-level", "warning", "-c", "2", *args]
    return subprocess.Popen(command, env=env(url), cwd=HERE)


def produce(url: str, code: str) -> float:
    """Run ``code`` in a fresh producer process; returns how long it took."""
    began = time.monotonic()
    prelude = "from taskforge import chain, group\nfrom workflows_app import app, noop\n"
    subprocess.run([sys.executable, "-c", prelude + code], env=env(url), cwd=HERE, check=True)
    return time.monotonic() - began


def drain(url: str) -> float:
    began = time.monotonic()
    code = worker(url, "--burst").wait(timeout=900)
    if code != 0:
        raise RuntimeError(f"the worker exited {code}")
    return time.monotonic() - began


def check_succeeded(url: str, expected: int) -> None:
    succeeded = redis.Redis.from_url(url).zcard("taskforge:{workflows}:succeeded")
    if succeeded != expected:
        raise RuntimeError(f"{succeeded} workflows succeeded, {expected} expected: the drain left work behind")


SHAPES = {
    "chains": (
        "noop.delay_many([() for _ in range({n3})])",
        "for _ in range({n}):\n    chain(noop.s(), noop.s(), noop.s()).delay()",
        "{n} chains of 3",
    ),
    "chord": (
        "noop.delay_many([() for _ in range({n1})])",
        "chain(group(noop.s() for _ in range({n})), noop.s()).delay()",
        "a group of {n} + a follow-up",
    ),
}


def one_round(url: str, shape: str, n: int) -> tuple[float, float, float]:
    """(plain drain s, workflow drain s, workflow producer s) for one shape."""
    plain_code, flow_code, _ = SHAPES[shape]
    client = redis.Redis.from_url(url)
    client.flushdb()
    produce(url, plain_code.format(n3=3 * n, n1=n + 1))
    plain = drain(url)
    client.flushdb()
    sent = produce(url, flow_code.format(n=n))
    flows = drain(url)
    check_succeeded(url, n if shape == "chains" else 1)
    return plain, flows, sent


def gaps(url: str, count: int) -> list[float]:
    redis.Redis.from_url(url).flushdb()
    proc = worker(url)
    try:
        code = (
            "import json, time\nfrom workflows_app import ended, started\ntime.sleep(2.0)\n"
            f"out = [chain(ended.s(), started.s()).delay().result(timeout=30) for _ in range({count})]\n"
            "print(json.dumps(out))"
        )
        prelude = "from taskforge import chain\n"
        done = subprocess.run(
            [sys.executable, "-c", prelude + code], env=env(url), cwd=HERE, check=True, capture_output=True
        )
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    import json

    return [float(v) for v in json.loads(done.stdout)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--redis", required=True, help="a Redis database this script may flush")
    parser.add_argument("--chains", type=int, default=2000)
    parser.add_argument("--group", type=int, default=10_000)
    parser.add_argument("--gaps", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--shapes", default="chains,chord", help="which of chains,chord to run (default both)")
    args = parser.parse_args()
    shapes = set(args.shapes.split(","))
    if shapes - set(SHAPES):
        parser.error(f"--shapes: unknown {', '.join(sorted(shapes - set(SHAPES)))} (known: {', '.join(SHAPES)})")
    print(f"redis-py {redis.__version__}, hiredis {'yes' if HIREDIS_AVAILABLE else 'no'} (the worker's too)\n")
    print("| workload | plain jobs drain s | workflow drain s | workflow / plain | producer s |")
    print("|---|---|---|---|---|")
    for shape, n in (("chains", args.chains), ("chord", args.group)):
        if shape not in shapes:
            continue
        rounds = [one_round(args.redis, shape, n) for _ in range(args.rounds)]
        plain = statistics.median(r[0] for r in rounds)
        flows = statistics.median(r[1] for r in rounds)
        sent = statistics.median(r[2] for r in rounds)
        ratios = ", ".join(f"{r[1] / r[0]:.2f}" for r in rounds)
        label = SHAPES[shape][2].format(n=n)
        print(f"| {label} | {plain:.2f} | {flows:.2f} | {flows / plain:.2f}x (rounds: {ratios}) | {sent:.2f} |")
    if args.gaps:
        ms = sorted(g * 1000 for g in gaps(args.redis, args.gaps))
        p50, p99 = statistics.median(ms), ms[min(len(ms) - 1, int(len(ms) * 0.99))]
        print(f"\nstep end -> next step start, idle -c 2 worker, {len(ms)} chains: p50 {p50:.2f} ms, p99 {p99:.2f} ms")


if __name__ == "__main__":
    main()
