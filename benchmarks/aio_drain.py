"""Async tasks against sync ones: the same jobs drained by ``taskforge worker -c 2 --burst``.

    python benchmarks/aio_drain.py --redis redis://127.0.0.1:6379/14

* no-op: ``--jobs`` no-op jobs of an ``async def`` task (run on each child's
  event loop) against as many of a plain ``def`` task (one lane per child):
  what the event loop costs per job when there is nothing to wait for;
* I/O: ``--naps`` jobs that each wait 50 ms, ``await asyncio.sleep`` on the
  loops (``--async 100``, the default) against ``time.sleep`` in 8 lanes per
  child (``-t 8``): what async tasks are for.

Everything is stored before the worker starts (the drain is what is timed,
the worker's start included, alike for both). Rounds alternate sync and
async, so the machine's drift touches both; the ratio is what to read.
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
os.environ.setdefault("AIO_DRAIN_REDIS", "redis://127.0.0.1:6379/14")
sys.path.insert(0, str(HERE))

# (label, sync task, its worker options, async task, its worker options, arguments)
WORKLOADS = {
    "no-op": ("noop", ["-c", "2"], "anoop", ["-c", "2"], ()),
    "I/O": ("nap", ["-c", "2", "-t", "8"], "anap", ["-c", "2"], (0.05,)),
}


def drain(url: str, task: str, count: int, args: tuple[float, ...], options: list[str]) -> float:
    """Store ``count`` jobs of ``task``, then time a burst worker that runs them all."""
    import aio_drain_app

    client = redis.Redis.from_url(url)
    client.flushdb()
    aio_drain_app.app.use_broker(None)
    getattr(aio_drain_app, task).delay_many([args] * count)
    began = time.monotonic()
    command = [sys.executable, "-m", "taskforge", "worker", "aio_drain_app:app", "--log-level", "warning", "--burst"]
    code = subprocess.run(
        [*command, *options], env={**os.environ, "PYTHONPATH": str(HERE), "AIO_DRAIN_REDIS": url}, cwd=HERE
    ).returncode
    took = time.monotonic() - began
    left = {k: client.zcard(f"taskforge:{{default}}:{k}") for k in ("pending", "scheduled", "running", "dead")}
    if code != 0 or any(left.values()):
        raise RuntimeError(f"the worker exited {code}, leaving {left}")
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--redis", required=True, help="a Redis database this script may flush")
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--naps", type=int, default=2_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    os.environ["AIO_DRAIN_REDIS"] = args.redis
    print("| workload | jobs | sync drain s (jobs/s) | async drain s (jobs/s) | async / sync time |")
    print("|---|---|---|---|---|")
    for label, (sync_task, sync_options, async_task, async_options, task_args) in WORKLOADS.items():
        count = args.jobs if label == "no-op" else args.naps
        rounds = [
            (
                drain(args.redis, sync_task, count, task_args, sync_options),
                drain(args.redis, async_task, count, task_args, async_options),
            )
            for _ in range(args.rounds)
        ]
        sync = statistics.median(r[0] for r in rounds)
        aio = statistics.median(r[1] for r in rounds)
        ratios = ", ".join(f"{r[1] / r[0]:.2f}" for r in rounds)
        print(
            f"| {label} (`{' '.join(sync_options)}` / `{' '.join(async_options)}`) | {count:,} | "
            f"{sync:.2f} ({count / sync:,.0f}) | {aio:.2f} ({count / aio:,.0f}) | "
            f"{aio / sync:.2f}x (rounds: {ratios}) |"
        )
    redis.Redis.from_url(args.redis).flushdb()


if __name__ == "__main__":
    main()
