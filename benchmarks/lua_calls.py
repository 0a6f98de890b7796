"""Commands run inside the Lua scripts per job on the plain path, and Redis time per script.

Starts a private ``redis-server`` on a free loopback port, then, with one
producer and one client playing a busy worker (``succeed_and_claim`` chained,
as a lane does), runs N plain jobs twice:

1. under ``MONITOR``: counts the commands each phase ran inside scripts
   (MONITOR marks them ``lua``) and the commands the client sent, per job;
2. without it: the Redis time per ``EVALSHA`` of each phase, from
   ``INFO commandstats`` reset at each phase (MONITOR, and a SLOWLOG at
   threshold 0, which logs every command inside a script too, would inflate it).

Uses only ``Broker`` methods that every version has, so the same script
measures an older tree (check it out, run this) and the current one.
Run from the repository root:

    python benchmarks/lua_calls.py [--jobs 2000] [--server redis-server]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path

import redis

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from soak import free_port  # noqa: E402

from taskforge import TaskForge  # noqa: E402
from taskforge.broker.queue import new_token  # noqa: E402

QUEUE = "lua-calls"
LEASE_MS = 60_000


def start_server(binary: str, port: int) -> subprocess.Popen[bytes]:
    argv = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    client = redis.Redis(port=port)
    deadline = time.monotonic() + 10
    while True:
        try:
            client.ping()
            return proc
        except redis.ConnectionError:
            if time.monotonic() > deadline:
                proc.kill()
                raise SystemExit(f"{binary} did not start on port {port}") from None
            time.sleep(0.05)


def run_phases(app: TaskForge, jobs: int, phase: Callable[[str], None]) -> None:
    """Enqueue ``jobs`` plain jobs, then drain them as a busy lane does; ``phase`` is told where each begins."""
    broker = app.broker
    task = app.tasks["noop"]
    phase("enqueue")
    for _ in range(jobs):
        task.delay()
    phase("drain")
    [claim], _ = broker.claims.dequeue(QUEUE, LEASE_MS, token=new_token())
    while claim is not None:
        _, (following, _) = broker.claims.succeed_and_claim(
            QUEUE, claim.id, claim.token, b"\xc0", LEASE_MS, new_token()
        )
        claim = following[0] if following else None
    phase("end")


def monitored(port: int, app: TaskForge, jobs: int) -> dict[str, Counter[str]]:
    """Per phase: Counter of commands, 'lua:<CMD>' for those run inside scripts, 'client:<CMD>' for the rest."""
    phases: dict[str, Counter[str]] = defaultdict(Counter)
    ready = threading.Event()
    done = threading.Event()

    def listen() -> None:
        phase = ""
        with redis.Redis(port=port).monitor() as monitor:
            ready.set()
            for entry in monitor.listen():
                command = entry["command"].split(" ", 1)
                name = command[0].strip('"').upper()
                if name == "ECHO" and "phase " in entry["command"]:
                    phase = entry["command"].split("phase ", 1)[1].strip('"')
                    if phase == "end":
                        break
                    continue
                if phase:
                    phases[phase][f"{entry.get('client_type') == 'lua' and 'lua' or 'client'}:{name}"] += 1
        done.set()

    thread = threading.Thread(target=listen, daemon=True)
    thread.start()
    ready.wait(10)
    time.sleep(0.2)  # MONITOR is registered once the server has answered it
    run_phases(app, jobs, lambda name: app.broker.client.echo(f"phase {name}"))
    done.wait(60)
    return phases


def script_times(port: int, app: TaskForge, jobs: int) -> dict[str, tuple[int, float]]:
    """Per phase: EVALSHA calls and Redis µs per call, from INFO commandstats (reset at each phase)."""
    admin = redis.Redis(port=port)
    times: dict[str, tuple[int, float]] = {}
    current = [""]

    def phase(name: str) -> None:
        if current[0]:
            stats = admin.info("commandstats").get("cmdstat_evalsha", {})
            times[current[0]] = (int(stats.get("calls", 0)), float(stats.get("usec_per_call", 0.0)))
        admin.config_resetstat()
        current[0] = name

    run_phases(app, jobs, phase)
    return times


def report(phases: dict[str, Counter[str]], times: dict[str, tuple[int, float]], jobs: int) -> None:
    for phase in ("enqueue", "drain"):
        counts = phases[phase]
        inside = sum(n for k, n in counts.items() if k.startswith("lua:"))
        sent = sum(n for k, n in counts.items() if k.startswith("client:"))
        label = "enqueue" if phase == "enqueue" else "claim + success"
        print(f"{label}: {inside / jobs:.2f} commands inside scripts per job, {sent / jobs:.2f} sent by the client")
        for key, n in sorted(counts.items(), key=lambda kv: -kv[1]):
            print(f"    {key:<28} {n / jobs:6.3f} per job")
    print("Redis time per script call (INFO commandstats, without MONITOR):")
    for phase, (calls, usec) in times.items():
        label = "enqueue" if phase == "enqueue" else "claim + success"
        print(f"    {label:<16} {calls:6d} EVALSHA  {usec:6.1f} µs per call")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--server", default=shutil.which("redis-server") or "redis-server")
    args = parser.parse_args()
    port = free_port()
    server = start_server(args.server, port)
    try:
        app = TaskForge("lua-calls", broker=f"redis://127.0.0.1:{port}/0")
        app.task(name="noop", queue=QUEUE)(lambda: None)
        app.broker.client.flushdb()
        phases = monitored(port, app, args.jobs)
        app.broker.client.flushdb()
        times = script_times(port, app, args.jobs)
        report(phases, times, args.jobs)
    finally:
        server.terminate()
        server.wait(10)


if __name__ == "__main__":
    main()
