"""Worker start to first job: ``taskforge worker -c N`` started, one job already queued, until its body runs.

What a deploy, a restart or autoscaling from zero waits for: the
interpreter, the imports, the children, the connections and the first
claim. Each start is timed from just before ``Popen`` to the wall time the
job's body wrote, on a private ``redis-server`` this script starts; the
worker is then stopped (SIGTERM, SIGKILL after 10 s).

With ``--base DIR`` (a directory holding another tree's ``taskforge``
package, e.g. an archive of an older commit) both trees start, interleaved
start by start, and the ratio of the medians is printed: the machine's load
drifts, so only figures within one run compare.

    python benchmarks/worker_start.py --starts 10 --base /path/to/old
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import redis
from drain_cpu import start_redis

HERE = Path(__file__).resolve().parent


def env_for(tree: str, url: str, mark: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), tree]), "START_REDIS": url, "START_MARK": str(mark)}


def one_start(tree: str, url: str, concurrency: int, workdir: Path) -> float:
    """Seconds from starting the worker to the body of the job queued before it."""
    mark = workdir / "mark"
    mark.unlink(missing_ok=True)
    redis.Redis.from_url(url).flushdb()
    env = env_for(tree, url, mark)
    subprocess.run([sys.executable, "-c", "from worker_start_app import mark; mark.delay()"], env=env, check=True)
    command = [sys.executable, "-m", "taskforge", "worker", "worker_start_app:app", "-c", str(concurrency)]
    began = time.time()
    proc = subprocess.Popen([*command, "--log-level", "warning"], env=env, cwd=workdir, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not mark.exists() or not mark.read_text():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{tree}: the worker exited {proc.returncode} or ran nothing in 60 s")
            time.sleep(0.002)
        return float(mark.read_text()) - began
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--starts", type=int, default=10, help="starts per tree (default 10)")
    parser.add_argument("-c", "--concurrency", type=int, default=2, help="the worker's -c (default 2)")
    parser.add_argument("--base", help="another tree to time too, start by start")
    parser.add_argument("--redis-server", default=shutil.which("redis-server") or "redis-server")
    args = parser.parse_args()
    trees = {"this tree": str(HERE.parent), **({"base": args.base} if args.base else {})}
    times: dict[str, list[float]] = {name: [] for name in trees}
    with tempfile.TemporaryDirectory() as workdir:
        server, url = start_redis(args.redis_server, workdir)
        try:
            for _ in range(args.starts):
                for name, tree in trees.items():
                    times[name].append(one_start(tree, url, args.concurrency, Path(workdir)))
        finally:
            server.terminate()
            server.wait()
    for name, runs in times.items():
        shown = " ".join(f"{t:.3f}" for t in runs)
        print(f"{name}: median {statistics.median(runs):.3f} s, best {min(runs):.3f} s  ({shown})")
    if args.base:
        ratio = statistics.median(times["this tree"]) / statistics.median(times["base"])
        print(f"this tree / base, medians: {ratio:.2f}x")


if __name__ == "__main__":
    main()
