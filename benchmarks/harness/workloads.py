"""The workloads of issue #6, run against one peer at a time on the shared Redis.

One timed round of a peer (``timed_round``):

    flush both databases
    W1   driver enqueue: N normal-API calls, then N bare SETs (the floor)
    W2   start the worker on those N queued jobs; time until the counter is N
    W3   same worker, now idle: latency of one-at-a-time jobs
         stop the worker (SIGTERM, bounded wait, SIGKILL of the group)
    W1b  flush the queue; driver bulk: one bulk call of N jobs (peers with a bulk API)

Commands per job (``count_commands``) is a separate, untimed pass: MONITOR
slows Redis down, so it never runs during a timed workload.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .peers import Peer
from .processes import Worker, run_bounded
from .resp import MARK_PREFIX, CommandCounter, Redis
from .scripttimes import SlowLog, per_script, script_shas

DONE, FIRST, LAST, STARTED = "bench:done", "bench:first", "bench:last", "bench:started"
POLL = 0.01
DRIVER_TIMEOUT = 300.0
IDLE_SETTLE = 1.0


class PhaseClock:
    """Wall time of each phase of a round, for the progress log (where the minutes go)."""

    def __init__(self) -> None:
        self.last = time.monotonic()
        self.laps: list[tuple[str, float]] = []

    def lap(self, name: str) -> None:
        now = time.monotonic()
        self.laps.append((name, now - self.last))
        self.last = now

    def __str__(self) -> str:
        return ", ".join(f"{name} {secs:.1f}s" for name, secs in self.laps)


class WorkloadError(Exception):
    """One workload failed for one peer; the harness reports it and goes on."""


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


@dataclass
class Settings:
    redis_url: str  # redis://host:port, no database
    queue_db: int
    counter_db: int
    procs: int
    drain_timeout: float
    stop_grace: float
    bench_dir: Path
    cache: Path
    side_effect: str = "raw"  # how a task records its completion: see peers/_common.py
    counter_redis_url: str = ""  # another server for the counter (redis_costs.py); default: redis_url

    @property
    def queue_url(self) -> str:
        return f"{self.redis_url}/{self.queue_db}"

    @property
    def counter_url(self) -> str:
        return f"{self.counter_redis_url or self.redis_url}/{self.counter_db}"


class Bench:
    def __init__(self, settings: Settings) -> None:
        self.s = settings
        self.queue = Redis.from_url(settings.queue_url)
        self.counter = Redis.from_url(settings.counter_url)
        self.logs = settings.cache / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)

    # -- plumbing ----------------------------------------------------------

    def env(self, peer: Peer, target: int = 0) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
        env.update(
            {
                "PATH": f"{peer.venv / 'bin'}{os.pathsep}{env.get('PATH', '')}",
                "VIRTUAL_ENV": str(peer.venv),
                "PYTHONPATH": str(self.s.bench_dir),
                "PYTHONUNBUFFERED": "1",
                "BENCH_QUEUE_URL": self.s.queue_url,
                "BENCH_COUNTER_URL": self.s.counter_url,
                "BENCH_TARGET": str(target),
                "BENCH_SIDE_EFFECT": self.s.side_effect,
            }
        )
        return env

    def flush(self, queue: bool = True, counter: bool = True) -> None:
        if queue:
            self.queue.call("FLUSHDB")
        if counter:
            self.counter.call("FLUSHDB")

    def driver(self, peer: Peer, action: str, n: int, *extra: str) -> dict[str, Any]:
        argv = [str(peer.python), str(self.s.bench_dir / "driver.py"), peer.name, action, "--n", str(n), *extra]
        try:
            proc = run_bounded(argv, self.env(peer), self.s.bench_dir, DRIVER_TIMEOUT)
        except TimeoutError as exc:
            raise WorkloadError(str(exc)) from None
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
        if proc.returncode != 0 or not lines:
            tail = " | ".join(proc.stderr.strip().splitlines()[-4:])
            raise WorkloadError(f"driver {action} exited {proc.returncode}: {tail}")
        result = json.loads(lines[-1])
        if "error" in result:
            raise WorkloadError(f"{action}: {result['error']}")
        return result

    def worker(self, peer: Peer, target: int, tag: str, extra: tuple[str, ...] = ()) -> Worker:
        log = self.logs / f"{peer.name}-{tag}.log"
        log.write_text("")
        return Worker(
            [*peer.worker_argv(self.s.procs, self.s.queue_url), *extra],
            peer.copies(self.s.procs),
            self.env(peer, target),
            self.s.bench_dir,
            log,
            self.s.cache / "live-workers.json",
        )

    def drain(self, worker: Worker, n: int) -> dict[str, float]:
        """Start ``worker`` on N queued jobs and time them; bounded by the drain timeout."""
        started = worker.start()
        deadline = started + self.s.drain_timeout
        highest = 0
        while True:
            done = int(self.counter.call("GET", DONE) or 0)
            if done < highest:
                # The Redis is shared: someone else's FLUSHDB on our counter database wipes the count.
                raise WorkloadError(
                    f"the completion counter went back from {highest} to {done}: another client "
                    f"flushed or wrote db {self.s.counter_db}; use --counter-db to move it"
                )
            highest = done
            if done >= n:
                seen = time.time()
                break
            gone = worker.exited()
            if gone:
                raise WorkloadError(f"{gone} after {done}/{n} jobs: {worker.log_tail()}")
            if time.time() > deadline:
                raise WorkloadError(
                    f"drain timeout: {done}/{n} jobs done after {self.s.drain_timeout:g} s "
                    f"(worker log: {worker.log_tail(3)})"
                )
            time.sleep(POLL)
        first, last = self.first_last(started, seen)
        return {
            "drain_from_start_jobs_per_s": n / (last - started),
            "drain_first_to_last_jobs_per_s": (n - 1) / (last - first) if last > first else float("nan"),
            "drain_startup_s": first - started,
        }

    def first_last(self, started: float, seen: float) -> tuple[float, float]:
        """The first and the last completion: min of ``bench:first*`` and max of ``bench:last*``.

        The raw side effect writes one key per worker process (``bench:first:<pid>``);
        the redis-py one writes ``bench:first`` and ``bench:last`` once each.
        """
        stamps: dict[str, list[float]] = {}
        for prefix in (FIRST, LAST):
            keys = self.counter.call("KEYS", prefix + "*")
            values = self.counter.call("MGET", *keys) if keys else []  # type: ignore[misc]
            stamps[prefix] = [float(v) for v in values or [] if v]  # type: ignore[union-attr]
        first = min(stamps[FIRST], default=started)
        last = max(stamps[LAST], default=seen)  # no LAST: a job ran twice and overshot the target
        return first, last

    # -- one timed round ---------------------------------------------------

    def timed_round(self, peer: Peer, n: int, latency_jobs: int, round_no: int) -> tuple[dict[str, float], list[str]]:
        """All workloads once; returns (metric -> value, errors)."""
        metrics: dict[str, float] = {}
        errors: list[str] = []
        clock = PhaseClock()
        self.flush()
        try:
            w1 = self.driver(peer, "enqueue", n)
            clock.lap("enqueue")
        except WorkloadError as exc:
            return metrics, [f"W1 enqueue: {exc}"]
        metrics["enqueue_jobs_per_s"] = n / w1["seconds"]
        metrics["floor_set_per_s"] = n / w1["floor_seconds"]
        metrics["enqueue_vs_floor"] = w1["floor_seconds"] / w1["seconds"]
        if "async_floor_seconds" in w1:
            metrics["async_floor_set_per_s"] = n / w1["async_floor_seconds"]
        worker = self.worker(peer, n, f"round{round_no}")
        try:
            try:
                metrics.update(self.drain(worker, n))
                clock.lap("drain")
            except WorkloadError as exc:
                clock.lap("drain (failed)")
                errors.append(f"W2 drain: {exc}")
                errors.append("W3 latency: skipped (the drain failed)")
            else:
                try:
                    lat = self.driver(peer, "latency", latency_jobs)["latencies_ms"]
                    metrics["latency_p50_ms"] = statistics.median(lat)
                    metrics["latency_p99_ms"] = percentile(lat, 0.99)
                    metrics["latency_max_ms"] = max(lat)
                    clock.lap("latency")
                except WorkloadError as exc:
                    errors.append(f"W3 latency: {exc} (worker log: {worker.log_tail(3)})")
        finally:
            worker.stop(self.s.stop_grace)
            clock.lap("stop")
        if peer.has_bulk:
            self.flush()
            try:
                bulk = self.driver(peer, "bulk", n)
                metrics["bulk_jobs_per_s"] = n / bulk["seconds"]
                clock.lap("bulk")
            except WorkloadError as exc:
                errors.append(f"W1b bulk: {exc}")
        self.flush()
        log(f"  {peer.name} round {round_no} took {clock}")
        return metrics, errors

    # -- worker start ----------------------------------------------------------

    def worker_start(self, peer: Peer) -> float:
        """Seconds from spawning the worker to the start of the one job queued before it.

        What a user waits for after a deploy or a scale-up: interpreter start,
        imports, connections, forking the processes, the first claim.
        """
        self.flush()
        self.driver(peer, "stamp", 1)
        worker = self.worker(peer, 1, "start")
        started = worker.start()
        deadline = started + self.s.drain_timeout
        try:
            while True:
                reply = self.counter.call("BLPOP", STARTED, 1)
                if reply:
                    return float(reply[1]) - started  # type: ignore[index]
                gone = worker.exited()
                if gone:
                    raise WorkloadError(f"worker start: {gone}: {worker.log_tail()}")
                if time.time() > deadline:
                    raise WorkloadError(f"worker start: no job started within {self.s.drain_timeout:g} s")
        finally:
            worker.stop(self.s.stop_grace)
            self.flush()

    # -- Redis time per script -----------------------------------------------

    def script_times(self, peer: Peer, n: int) -> dict[str, dict[str, float]]:
        """Redis µs per call of each taskforge script over an untimed enqueue + drain of N jobs."""
        shas = script_shas(peer)
        self.flush()
        worker = self.worker(peer, n, "scripts")
        try:
            with SlowLog(self.queue) as slowlog:
                self.driver(peer, "enqueue", n, "--no-floor")
                self.drain(worker, n)
        finally:
            worker.stop(self.s.stop_grace)
            self.flush()
        return per_script(slowlog.entries, shas, n)

    # -- commands per job ----------------------------------------------------

    def mark(self, label: str) -> None:
        self.queue.call("ECHO", MARK_PREFIX + label)

    def count_commands(self, peer: Peer, n: int, idle: float) -> tuple[dict[str, Any], list[str]]:
        """Commands the library sends to the queue database per job, per phase (untimed, MONITOR)."""
        errors: list[str] = []
        out: dict[str, Any] = {"n": n}
        self.flush()
        counter = CommandCounter(self.queue.host, self.queue.port, self.s.queue_db, self.queue.my_addr())
        last_mark = "start"
        try:
            self.mark("enqueue")
            self.driver(peer, "enqueue", n, "--no-floor")
            self.mark(last_mark := "enqueue-end")
            worker = self.worker(peer, n, "commands")
            try:
                self.mark("drain")
                self.drain(worker, n)
                self.mark(last_mark := "drain-end")
                if idle > 0:
                    time.sleep(IDLE_SETTLE)  # past the post-drain transient (leftover wake-ups, acks)
                    self.mark("idle")
                    time.sleep(idle)
                    self.mark(last_mark := "idle-end")
            finally:
                worker.stop(self.s.stop_grace)
            if peer.has_bulk:
                self.flush()
                self.mark("bulk")
                self.driver(peer, "bulk", n)
                self.mark(last_mark := "bulk-end")
        except WorkloadError as exc:
            errors.append(f"commands: {exc}")
        finally:
            try:
                counter.wait_mark(last_mark) if last_mark != "start" else None
            finally:
                counter.stop()
            self.flush()
        phases = {"enqueue": "enqueue", "drain": "drain", "bulk": "bulk"}
        for phase, label in phases.items():
            if any(seg.label == label for seg in counter.segments) and f"{label}-end" in counter.marks_seen:
                out[phase] = counter.segment(label).as_dict(n)
        if idle > 0 and "idle-end" in counter.marks_seen:
            settle, seg = counter.segment("drain-end"), counter.segment("idle")
            out["post_drain_settle_by_command"] = dict(settle.client.most_common())
            out["idle_client_per_s"] = round(sum(seg.client.values()) / idle, 2)
            out["idle_total_per_s"] = round((sum(seg.client.values()) + sum(seg.lua.values())) / idle, 2)
            out["idle_by_command"] = dict(seg.client.most_common())
        return out, errors


_T0 = time.monotonic()


def log(message: str) -> None:
    """Progress on stderr, stamped with seconds since the harness started."""
    print(f"[{time.monotonic() - _T0:6.1f}s] {message}", file=sys.stderr, flush=True)
