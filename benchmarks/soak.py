"""Soak: many no-op jobs through one worker; memory must stay flat and Redis must end as it began.

Runs ``--jobs`` no-op jobs (default 100,000) through one ``taskforge worker
-c N`` (default ``-c 1``: one child, so its RSS is the whole story) on a private
redis-server (or ``--redis URL``, whose database it FLUSHes), the producer
enqueuing in ``delay_many`` batches while the worker drains. Prints the RSS of the
supervisor and of each child (from /proc) at the start (after a warm-up of
``--warmup`` jobs, so imports and first-use caches are not counted as growth),
the middle and the end; then waits for the jobs' ``retention`` (``--retention``
seconds, default 3) to pass and compares the number of Redis keys with the
baseline taken after the warm-up's own records expired. One summary line at the
end, PASS when RSS grew less than 10 % and the keys are back to the baseline.

    python benchmarks/soak.py                 # 100,000 jobs, -c 1
    python benchmarks/soak.py --jobs 10000 --concurrency 2

Linux only (/proc). Every wait is bounded; every process it starts is stopped.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import redis

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from taskforge import TaskForge  # noqa: E402
from taskforge.broker.keys import QueueKeys  # noqa: E402

QUEUE = "soak"
TASK = "soak.noop"
RSS_TARGET = 0.10


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def rss_kib(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def children(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def wait_until(predicate, timeout: float, what: str, interval: float = 0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout:g} s waiting for {what}")


def kill_group(proc: subprocess.Popen[bytes], grace: float) -> None:
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # whatever is left of the group, children included
    except ProcessLookupError:
        pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


class Soak:
    def __init__(self, opts: argparse.Namespace) -> None:
        self.opts = opts
        self.tmp = Path(tempfile.mkdtemp(prefix="taskforge-soak-"))
        self.procs: list[subprocess.Popen[bytes]] = []
        self.url = opts.redis
        self.client: redis.Redis | None = None
        self.worker: subprocess.Popen[bytes] | None = None
        self.enqueued = 0
        self.producer_error: BaseException | None = None

    def log(self, message: str) -> None:
        print(f"[soak {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)

    # -- processes ----------------------------------------------------------

    def start(self, argv: list[str], log: str, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        with (self.tmp / log).open("ab") as out:
            proc = subprocess.Popen(
                argv,
                cwd=HERE,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.procs.append(proc)
        return proc

    def start_redis(self) -> None:
        if self.url:
            self.client = redis.Redis.from_url(self.url)
            self.client.flushdb()
            return
        binary = shutil.which("redis-server")
        if binary is None:
            raise SystemExit("soak: no redis-server on PATH; pass --redis URL")
        port = free_port()
        no_disk = ["--save", "", "--appendonly", "no"]  # a throw-away server: nothing written to disk
        self.start([binary, "--port", str(port), "--bind", "127.0.0.1", *no_disk, "--dir", str(self.tmp)], "redis.log")
        self.url = f"redis://127.0.0.1:{port}/0"
        self.client = redis.Redis.from_url(self.url)
        wait_until(self.ping, 15, "the private redis-server")

    def ping(self) -> bool:
        try:
            return bool(self.client.ping())
        except redis.ConnectionError:
            return False

    def start_worker(self) -> None:
        env = {
            **os.environ,
            "TASKFORGE_BROKER_URL": self.url,
            "SOAK_RETENTION": str(self.opts.retention),
            "PYTHONPATH": os.pathsep.join([str(HERE.parent), os.environ.get("PYTHONPATH", "")]),
        }
        self.worker = self.start(
            [
                sys.executable,
                "-m",
                "taskforge",
                "worker",
                "soak_app:app",
                "-c",
                str(self.opts.concurrency),
                "-q",
                QUEUE,
                "--no-periodic",
                "--log-level",
                "warning",
            ],
            "worker.log",
            env,
        )
        wait_until(
            lambda: (
                sum("resource_tracker" not in cmdline(p) for p in children(self.worker.pid)) >= self.opts.concurrency
            ),
            30,
            "the worker's children",
        )

    def stop_all(self) -> None:
        for proc in reversed(self.procs):
            kill_group(proc, grace=10)

    # -- measuring ----------------------------------------------------------

    def rss(self) -> dict[str, int | None]:
        """RSS (KiB) of the supervisor and each process it started, named by what each one is."""
        sizes: dict[str, int | None] = {"supervisor": rss_kib(self.worker.pid)}
        jobs = 0
        for pid in sorted(children(self.worker.pid)):
            if "resource_tracker" in cmdline(pid):
                name = f"resource tracker (pid {pid})"  # multiprocessing's helper for the spawn start method
            else:
                name = f"child {jobs} (pid {pid})"
                jobs += 1
            sizes[name] = rss_kib(pid)
        return sizes

    def unfinished(self) -> int:
        q = QueueKeys(QUEUE)
        pipe = self.client.pipeline(transaction=False)
        for key in (q.pending, q.scheduled, q.running):
            pipe.zcard(key)
        return sum(pipe.execute())

    def done(self) -> int:
        return self.enqueued - self.unfinished()

    def keys(self) -> Counter[str]:
        """Keys by kind: the part after the hash tag up to the next ':' (job, done, claim...), or the key."""
        kinds: Counter[str] = Counter()
        for key in self.client.scan_iter(count=1000):
            text = key.decode(errors="replace")
            kinds[text.split("}:", 1)[1].split(":")[0] if "}:" in text else ":".join(text.split(":")[:2])] += 1
        return kinds

    def check_worker(self) -> None:
        if self.worker.poll() is not None:
            tail = (self.tmp / "worker.log").read_text(errors="replace")[-2000:]
            raise RuntimeError(f"the worker exited with {self.worker.returncode}:\n{tail}")
        if self.producer_error is not None:
            raise RuntimeError(f"the producer failed: {self.producer_error!r}")

    # -- the run ------------------------------------------------------------

    def produce(self, total: int) -> None:
        try:
            producer = TaskForge("soak-producer", broker=self.url)
            task = producer.task_for(TASK).with_options(queue=QUEUE)
            batch = self.opts.batch
            while self.enqueued < total:
                n = min(batch, total - self.enqueued)
                task.delay_many([(i,) for i in range(n)])
                self.enqueued += n
                # Stay at most a few batches ahead of the worker: a soak, not a backlog test.
                while self.unfinished() > 20 * batch:
                    time.sleep(0.05)
        except BaseException as exc:  # reported by check_worker, in the main thread
            self.producer_error = exc

    def run_jobs(self, total: int, milestones: dict[str, float]) -> dict[str, dict[str, int | None]]:
        """Enqueue ``total`` jobs while the worker runs them; RSS at each milestone fraction of the run."""
        base = self.enqueued
        thread = threading.Thread(target=self.produce, args=(base + total,), daemon=True)
        thread.start()
        samples: dict[str, dict[str, int | None]] = {}
        deadline = time.monotonic() + self.opts.timeout
        last_report = 0.0
        while True:
            self.check_worker()
            finished = self.done() - base
            for name, fraction in milestones.items():
                if name not in samples and finished >= fraction * total and self.enqueued - base >= fraction * total:
                    samples[name] = self.rss()
            if finished >= total and self.enqueued - base >= total:
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"only {finished:,} of {total:,} jobs done after {self.opts.timeout:g} s")
            if time.monotonic() - last_report > 10:
                self.log(f"{finished:,}/{total:,} jobs done")
                last_report = time.monotonic()
            time.sleep(0.05)
        thread.join(timeout=10)
        return samples

    def job_records(self) -> int:
        return sum(1 for _ in self.client.scan_iter(match="taskforge:*:job:*", count=5000))

    def wait_expired(self, timeout: float) -> tuple[int, float]:
        """Wait out the retention until no job record is left; returns (DBSIZE, seconds waited)."""
        started = time.monotonic()
        time.sleep(self.opts.retention)
        try:
            wait_until(lambda: self.job_records() == 0, timeout, "the finished jobs' records to expire", 0.5)
        except TimeoutError:
            self.log(f"{self.job_records():,} job records still there after {timeout:g} s")
        return self.client.dbsize(), time.monotonic() - started

    def run(self) -> int:
        opts = self.opts
        self.start_redis()
        self.start_worker()
        rss_idle = self.rss()
        self.log(f"worker pid {self.worker.pid}, children {children(self.worker.pid)}; warm-up of {opts.warmup} jobs")
        self.run_jobs(opts.warmup, {})
        baseline, _ = self.wait_expired(60)
        baseline_kinds = self.keys()
        self.log(f"baseline: {baseline} keys {dict(baseline_kinds)}; running {opts.jobs:,} jobs")
        started = time.monotonic()
        samples = self.run_jobs(opts.jobs, {"start": 0.0, "middle": 0.5, "end": 1.0})
        elapsed = time.monotonic() - started
        self.check_worker()
        after, waited = self.wait_expired(120)
        after_kinds = self.keys()
        return self.report(rss_idle, samples, elapsed, baseline, baseline_kinds, after, after_kinds, waited)

    def report(self, idle, samples, elapsed, baseline, baseline_kinds, after, after_kinds, waited) -> int:
        opts = self.opts
        sys.stderr.flush()
        print(
            f"soak: {opts.jobs:,} no-op jobs, worker -c {opts.concurrency}, retention {opts.retention:g} s, "
            f"producer batches of {opts.batch}, {elapsed:.1f} s ({opts.jobs / elapsed:,.0f} jobs/s)"
        )
        print(f"  {'process':<28}{'idle':>10}{'start':>10}{'middle':>10}{'end':>10}{'growth':>9}")
        worst = 0.0
        for name in samples["start"]:
            row = [idle.get(name)] + [samples[m].get(name) for m in ("start", "middle", "end")]
            first, last = row[1], row[3]
            growth = (last - first) / first if first and last else float("nan")
            worst = max(worst, growth) if growth == growth else worst
            cells = "".join(f"{(v / 1024):>8.1f}MB" if v else f"{'-':>10}" for v in row)
            print(f"  {name:<28}{cells}{growth:>+8.1%}")
        if set(samples["start"]) != set(samples["end"]):
            print(f"  children changed during the run: {sorted(samples['start'])} -> {sorted(samples['end'])}")
        extra = {
            k: after_kinds[k] - baseline_kinds.get(k, 0)
            for k in after_kinds
            if after_kinds[k] != baseline_kinds.get(k, 0)
        }
        print(
            f"  redis keys: {baseline} before the run, {after} after it ({waited:.1f} s after the last job; "
            f"retention {opts.retention:g} s){'; difference by kind: ' + str(extra) if extra else ''}"
        )
        ok = worst < RSS_TARGET and after <= baseline
        sys.stderr.flush()
        print(
            f"SOAK {'PASS' if ok else 'FAIL'}: {opts.jobs:,} jobs in {elapsed:.0f} s, -c {opts.concurrency}; "
            f"RSS growth start->end at most {worst:+.1%} (target < {RSS_TARGET:.0%}); "
            f"keys {baseline} -> {after} (target: back to {baseline})"
        )
        return 0 if ok else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--concurrency", "-c", type=int, default=1)
    parser.add_argument("--retention", type=float, default=3.0, help="seconds finished records are kept")
    parser.add_argument("--batch", type=int, default=500, help="jobs per delay_many call")
    parser.add_argument("--warmup", type=int, default=2_000)
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds the main run may take")
    parser.add_argument(
        "--redis", default=None, help="use this Redis URL (its database is FLUSHed) instead of a private redis-server"
    )
    opts = parser.parse_args()
    soak = Soak(opts)

    def stop(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, stop)
    try:
        return soak.run()
    finally:
        soak.stop_all()
        shutil.rmtree(soak.tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
