"""Soak: a steady stream of no-op jobs through one worker for a long time; every figure must stay flat.

Sends ``--rate`` no-op jobs a second (default 1,000, in ``delay_many`` batches
every 0.1 s) for ``--minutes`` (default 30) to one ``taskforge worker -c N``
(default ``-c 2``) on a private redis-server (or ``--redis URL``, whose
database it FLUSHes), with ``retention`` of ``--retention`` seconds (default
5). It reads, once a second, Redis's ``used_memory`` (``INFO memory``),
``DBSIZE``, the queue's search index entries (``ZCARD``), the jobs not yet
finished, and the worker's RSS (the supervisor and its children, from
/proc), and every ``--every`` seconds (default 60) prints the median of the
readings since the last line. At the end, for each figure, the lowest and
highest of those medians after minute ``--settle`` (default 5) as a ratio to
the median of that minute (and the extremes of single readings), and PASS when
used_memory, keys and RSS stay within ±10 % and the worker kept up (it ran
at least 90 % of ``--rate`` after minute 5; the producer skips a batch while
more than two seconds of jobs wait, so a slow machine gives a slower run,
not a growing backlog). Then it waits out the retention and counts the keys
left.

    python benchmarks/soak.py                          # 30 minutes at 1,000 jobs/s
    python benchmarks/soak.py --minutes 8 --rate 500

Linux only (/proc). Every wait is bounded; every process it starts is stopped.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import statistics
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
from taskforge.broker.keys import QueueKeys, search_index  # noqa: E402

QUEUE = "soak"
TASK = "soak.noop"
FLAT = 0.10  # every judged figure within ±10 % of the settled one
BACKLOG = 2.0  # seconds of jobs waiting past which the producer skips a batch
TICK = 0.1  # seconds between the producer's batches


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
        self.skipped = 0  # jobs not sent: the worker was more than BACKLOG seconds behind
        self.stopping = threading.Event()
        self.kinds: Counter[str] | None = None  # keys by kind at the settled sample
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

    def produce(self, rate: float, seconds: float) -> None:
        """``rate`` jobs a second for ``seconds``, a batch every ``TICK`` s, on a clock that does not drift.

        A batch is skipped (not sent later) while more than ``BACKLOG`` seconds
        of jobs wait: a worker that cannot keep up, on a busy machine, makes
        the run slower (the rate done is printed), never a growing backlog
        that would hide what the soak is about.
        """
        try:
            producer = TaskForge("soak-producer", broker=self.url)
            task = producer.task_for(TASK).with_options(queue=QUEUE)
            started = time.monotonic()
            owed = 0.0
            while not self.stopping.is_set():
                elapsed = time.monotonic() - started
                if elapsed >= seconds:
                    return
                owed += rate * TICK
                due = int(owed)
                if due > 0 and self.unfinished() <= rate * BACKLOG:
                    task.delay_many([(i,) for i in range(due)])
                    self.enqueued += due
                elif due > 0:
                    self.skipped += due
                owed -= due
                self.stopping.wait(max(0.0, started + (int(elapsed / TICK) + 1) * TICK - time.monotonic()))
        except BaseException as exc:  # reported by check_worker, in the main thread
            self.producer_error = exc

    def reading(self) -> dict[str, float]:
        """Redis's figures now, and the worker's RSS (supervisor and children), in bytes."""
        sizes = self.rss()
        keys, waiting = float(self.client.dbsize()), float(self.unfinished())
        return {
            "used_memory": float(self.client.info("memory")["used_memory"]),
            "keys": keys,
            "index": float(self.client.zcard(search_index(QUEUE))),
            "waiting": waiting,
            "rss": float(sum(v for v in sizes.values() if v) * 1024),
            "kept": keys - waiting,  # keys but the records of jobs not finished: what retention bounds
        }

    def sample(self, minute: float, readings: list[dict[str, float]]) -> dict[str, float]:
        """The median of the readings (one a second) since the last sample, and their extremes.

        The records kept are the jobs finished in the last ``retention``
        seconds, and the keys count the jobs waiting too, so a worker that
        pauses a few seconds on a busy machine moves the key count of those
        seconds by a fifth or more at retention 5 s: the median of the minute
        is the level a figure sits at, what stays, or does not stay, flat.
        The extremes of single readings are kept too, and printed at the end.
        """
        row = {name: statistics.median(r[name] for r in readings) for name in readings[0]}
        for name in readings[0]:
            row[f"{name}_low"] = min(r[name] for r in readings)
            row[f"{name}_high"] = max(r[name] for r in readings)
        return {**row, "minute": minute, "done": float(self.done())}

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

    def show(self, row: dict[str, float]) -> None:
        print(
            f"  {row['minute']:>6.1f} {row['used_memory'] / 2**20:>11.2f} MB {row['keys']:>9,.0f} "
            f"{row['index']:>9,.0f} {row['waiting']:>9,.0f} {row['rss'] / 2**20:>9.1f} MB {row['done']:>12,.0f}",
            flush=True,
        )

    def run(self) -> int:
        opts = self.opts
        self.start_redis()
        self.start_worker()
        before = self.client.dbsize()
        seconds = opts.minutes * 60
        thread = threading.Thread(target=self.produce, args=(opts.rate, seconds), daemon=True)
        print(
            f"soak: {opts.rate:,.0f} no-op jobs/s for {opts.minutes:g} min, worker -c {opts.concurrency}, "
            f"retention {opts.retention:g} s; a sample every {opts.every:g} s"
        )
        heads = ("minute", 6), ("used_memory", 14), ("keys", 9), ("index", 9), ("waiting", 9), ("worker RSS", 12)
        print(" ", *(f"{name:>{width}}" for name, width in heads), f"{'jobs done':>12}")
        started = time.monotonic()
        thread.start()
        rows: list[dict[str, float]] = []
        readings: list[dict[str, float]] = []
        try:
            while True:
                self.check_worker()
                elapsed = time.monotonic() - started
                readings.append(self.reading())
                if elapsed >= len(rows) * opts.every:
                    rows.append(self.sample(elapsed / 60, readings))
                    readings = []
                    self.show(rows[-1])
                    if self.kinds is None and rows[-1]["minute"] >= opts.settle - 0.01:
                        self.kinds = self.keys()
                if elapsed >= seconds:
                    break
                time.sleep(min(1.0, max(0.0, len(rows) * opts.every - elapsed)))
        finally:
            self.stopping.set()
            thread.join(timeout=30)
        self.check_worker()
        if self.kinds is not None:  # which kinds of key grew or shrank since the settled sample: what to look at
            now = self.keys()
            moved = {k: f"{self.kinds.get(k, 0)}->{now.get(k, 0)}" for k in {*self.kinds, *now}}
            print(f"  keys by kind, settled sample -> end: {dict(sorted(moved.items()))}")
        after, waited = self.wait_expired(120)
        return self.report(rows, before, after, waited)

    def report(self, rows: list[dict[str, float]], before: int, after: int, waited: float) -> int:
        opts = self.opts
        settled = [r for r in rows if r["minute"] >= opts.settle - 0.01]
        if len(settled) < 2:
            print(f"SOAK FAIL: fewer than two samples after minute {opts.settle:g}; run longer")
            return 1
        base = settled[0]
        ok = True
        print(f"  after minute {base['minute']:.1f}, lowest and highest minute's median / that minute's median:")
        figures = (("used_memory", True), ("keys", True), ("rss", True), ("index", False), ("kept", False))
        for name, judged in figures:
            low = min(r[name] for r in settled) / base[name] if base[name] else float("nan")
            high = max(r[name] for r in settled) / base[name] if base[name] else float("nan")
            inside = 1 - FLAT <= low and high <= 1 + FLAT
            ok = ok and (inside or not judged)
            verdict = ("ok" if inside else "OUTSIDE") if judged else "(shown)"
            lowest = min(r[f"{name}_low"] for r in settled[1:]) / base[name] if base[name] else float("nan")
            highest = max(r[f"{name}_high"] for r in settled[1:]) / base[name] if base[name] else float("nan")
            print(
                f"    {name:<12} min {low:.3f}  max {high:.3f}  {verdict:<8}"
                f"(single readings, one a second: {lowest:.3f} to {highest:.3f})"
            )
        rate = (rows[-1]["done"] - base["done"]) / max(1.0, (rows[-1]["minute"] - base["minute"]) * 60)
        kept_up = rows[-1]["waiting"] < opts.rate * 10 and rate >= (1 - FLAT) * opts.rate
        ok = ok and kept_up
        print(f"  jobs sent {self.enqueued:,}; not sent while the worker was {BACKLOG:g} s behind: {self.skipped:,}")
        print(
            f"  jobs done after minute {base['minute']:.1f}: {rate:,.0f}/s; "
            f"waiting at the end: {rows[-1]['waiting']:,.0f}"
            f" ({'kept up' if kept_up else 'FELL BEHIND'}); keys {before} before the run, {after} "
            f"{waited:.0f} s after it"
        )
        print(
            f"SOAK {'PASS' if ok else 'FAIL'}: {opts.rate:,.0f} jobs/s for {opts.minutes:g} min, "
            f"-c {opts.concurrency}, "
            f"retention {opts.retention:g} s; used_memory, keys and worker RSS after minute {opts.settle:g} "
            f"{'within' if ok else 'not all within'} ±{FLAT:.0%} of that minute's"
        )
        return 0 if ok else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=1000.0, help="jobs sent per second")
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--settle", type=float, default=5.0, help="minutes before the figures are judged")
    parser.add_argument("--every", type=float, default=60.0, help="seconds between samples")
    parser.add_argument("--concurrency", "-c", type=int, default=2)
    parser.add_argument("--retention", type=float, default=5.0, help="seconds finished records are kept")
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
