"""Redis memory and Redis time a plain job costs: queued, finished and kept, and over its life.

Per tree (this one, and with ``--base DIR`` another tree's ``taskforge``
package, rounds interleaved), on a private Redis (``--url``; it is
flushed): N ``noop.delay()`` of a no-argument task, then ``taskforge worker
--burst -c 2``. It prints, per job:

- ``used_memory`` growth with the jobs queued, and once they finished (the
  records kept for the default retention), and what each part holds then
  (``MEMORY USAGE`` of one record, of the pending set, of the search index
  and of the set of expiring records, divided by N);
- Redis time (``INFO commandstats``, reset before each phase: the scripts'
  own microseconds inside Redis, without the round trips) for the enqueues,
  for the drain, and for the whole life.

    redis-server --port 6392 --save '' --appendonly no --daemonize yes
    python benchmarks/job_memory.py --url redis://127.0.0.1:6392/0 --jobs 20000 --rounds 2 --base /path/to/old
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import redis

APP = """
import os
from taskforge import TaskForge

app = TaskForge("memory", os.environ["MEMORY_REDIS"])


@app.task
def noop():
    return None
"""
PREFIX = "taskforge:{default}:"
ROOT = Path(__file__).resolve().parent.parent  # this tree: its taskforge, not an installed one


@dataclass
class Run:
    tree: str
    figures: dict[str, float] = field(default_factory=dict)


def redis_us(client: redis.Redis) -> tuple[float, float]:
    """Microseconds inside Redis's scripts, and commands run (a script's own included), since CONFIG RESETSTAT.

    A script's line counts the commands it runs, which are also counted on
    their own lines: the scripts' time is the script lines alone.
    """
    stats = client.info("commandstats")
    usec = sum(float(v["usec"]) for k, v in stats.items() if k.startswith("cmdstat_eval"))
    calls = sum(float(v["calls"]) for k, v in stats.items() if k != "cmdstat_info")
    return usec, calls


def parts(client: redis.Redis, jobs: int, run: Run, phase: str) -> None:
    """The bytes of one record, and of each shared structure, per job."""
    job_keys = list(client.scan_iter(PREFIX + "job:*", count=1000))[:200]
    if job_keys:
        sizes = [client.memory_usage(key, samples=0) or 0 for key in job_keys]
        run.figures[f"{phase} record (MEMORY USAGE)"] = statistics.mean(sizes)
        run.figures[f"{phase} record fields"] = float(client.hlen(job_keys[0]))
    for name in ("pending", "index", "expiring"):
        usage = client.memory_usage(PREFIX + name, samples=0) or 0
        run.figures[f"{phase} {name} per job"] = usage / jobs


def one_run(tree: str | None, url: str, jobs: int, workdir: str) -> Run:
    client = redis.Redis.from_url(url)
    client.flushall()
    env = {**os.environ, "MEMORY_REDIS": url, "PYTHONPATH": os.pathsep.join([workdir, tree or str(ROOT)])}
    run = Run(tree or "this tree")
    # The scripts are loaded and one job's keys exist before the first figure.
    warm = "from memory_app import noop\nnoop.delay()"
    subprocess.run([sys.executable, "-c", warm], env=env, cwd=workdir, check=True)
    worker = [sys.executable, "-m", "taskforge", "worker", "memory_app:app", "--log-level", "warning", "--burst"]
    subprocess.run([*worker, "-c", "2"], env=env, cwd=workdir, check=True)
    client.delete(*client.keys(PREFIX + "job:*"))
    base = client.info("memory")["used_memory"]
    client.config_resetstat()
    code = f"from memory_app import noop\nfor _ in range({jobs}):\n    noop.delay()"
    subprocess.run([sys.executable, "-c", code], env=env, cwd=workdir, check=True)
    usec, calls = redis_us(client)
    run.figures["queued B/job"] = (client.info("memory")["used_memory"] - base) / jobs
    run.figures["enqueue script µs/job"] = usec / jobs
    run.figures["enqueue commands/job"] = calls / jobs
    parts(client, jobs, run, "queued")
    client.config_resetstat()
    subprocess.run([*worker, "-c", "2"], env=env, cwd=workdir, check=True)
    usec, calls = redis_us(client)
    run.figures["finished B/job"] = (client.info("memory")["used_memory"] - base) / jobs
    run.figures["drain script µs/job"] = usec / jobs
    run.figures["drain commands/job"] = calls / jobs
    run.figures["life script µs/job"] = run.figures["enqueue script µs/job"] + usec / jobs
    parts(client, jobs, run, "finished")
    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--base", help="directory holding the taskforge package to compare with")
    parser.add_argument("--url", required=True, help="a private Redis: every round flushes it")
    opts = parser.parse_args()
    trees: list[str | None] = [None] + ([str(Path(opts.base).resolve())] if opts.base else [])
    results: dict[str | None, list[Run]] = {tree: [] for tree in trees}
    with tempfile.TemporaryDirectory() as workdir:
        Path(workdir, "memory_app.py").write_text(APP)
        for round_ in range(opts.rounds):
            for tree in trees if round_ % 2 == 0 else reversed(trees):
                run = one_run(tree, opts.url, opts.jobs, workdir)
                results[tree].append(run)
                brief = ", ".join(f"{k} {v:.1f}" for k, v in run.figures.items() if "/job" in k and "per" not in k)
                print(f"round {round_ + 1} {run.tree}: {brief}", flush=True)
    print(f"\n{opts.jobs:,} noop.delay() then `worker --burst -c 2`, median of {opts.rounds}\n")
    names = [run.tree for run in (results[tree][0] for tree in trees)]
    print("| per job | " + " | ".join(names) + " |")
    print("|---" * (len(names) + 1) + "|")
    for key in results[trees[0]][0].figures:
        cells = [statistics.median(run.figures.get(key, 0.0) for run in results[tree]) for tree in trees]
        print(f"| {key} | " + " | ".join(f"{c:,.1f}" for c in cells) + " |")


if __name__ == "__main__":
    main()
