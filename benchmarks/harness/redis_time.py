"""Redis time per job's life (issue #50): enqueue + claim + outcome, from ``INFO commandstats``.

An untimed pass per library on a private ``redis-server`` this module starts
on a free loopback port (``--redis-server``), for two reasons: commandstats
is server-wide, so any other client of the harness's Redis would be counted,
and it has no database column, so the completion counter (an ``INCR`` and a
``SET`` per job) must live on another server: it stays on the harness's
Redis (``Settings.counter_redis_url``).

    CONFIG RESETSTAT; N jobs through the normal API     -> enqueue
    CONFIG RESETSTAT; the worker drains them            -> drain (claim + outcome)

The drain is ``worker --burst`` for a library whose SPEC names a burst
option (taskforge: it exits once the queue is empty, its goodbye included);
for the others, the stats are read as the counter reaches N.

Commands a Lua script runs are counted by commandstats twice: on their own
line and inside the script's time. Redis's time per job is the sum over the
commands clients sent, so each line is split by the share of its calls that
ran inside scripts, as the MONITOR pass of the same library counted them
(``count_commands``: MONITOR slows scripts down, so the two passes cannot be
one). A library that runs no script needs no split. ``INFO cpu`` of the
server (its user + system CPU per job, parsing and networking included) is
printed beside it.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from .peers import Peer
from .resp import Redis, RedisError
from .workloads import Bench, WorkloadError

SCRIPT_COMMANDS = {"EVAL", "EVALSHA", "EVAL_RO", "EVALSHA_RO", "FCALL", "FCALL_RO"}
HARNESS_COMMANDS = {"INFO", "CONFIG", "FLUSHDB"}  # what this module sends to the server
START_TIMEOUT = 15.0


def default_server() -> str:
    return shutil.which("redis-server") or "redis-server"


@contextmanager
def private_server(binary: str) -> Iterator[str]:
    """A ``redis-server`` of our own on a free loopback port, no persistence; yields its URL."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    with tempfile.TemporaryDirectory(prefix="bench-redis-") as workdir:
        argv = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        proc = subprocess.Popen([*argv, "--dir", workdir], stdout=subprocess.DEVNULL, start_new_session=True)
        try:
            deadline = time.monotonic() + START_TIMEOUT
            while True:
                try:
                    Redis("127.0.0.1", port, 0, timeout=1.0).close()
                    break
                except OSError:
                    if proc.poll() is not None or time.monotonic() > deadline:
                        raise RedisError(f"{binary} did not start on port {port}") from None
                    time.sleep(0.05)
            yield f"redis://127.0.0.1:{port}"
        finally:
            proc.terminate()
            proc.wait(10)


def commandstats(redis: Redis) -> dict[str, tuple[int, int]]:
    """Command (upper case, without its subcommand) -> (calls, usec), the harness's own left out."""
    out: dict[str, tuple[int, int]] = {}
    for line, value in redis.info("commandstats").items():
        name = line.removeprefix("cmdstat_").split("|")[0].upper()
        if name in HARNESS_COMMANDS:
            continue
        fields = dict(part.split("=", 1) for part in value.split(","))
        calls, usec = out.get(name, (0, 0))
        out[name] = (calls + int(fields["calls"]), usec + int(fields["usec"]))
    return out


def server_cpu(redis: Redis) -> float:
    info = redis.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def inside_share(monitor: dict[str, Any] | None) -> dict[str, float]:
    """Command -> share of its calls that ran inside scripts, from a MONITOR count of the same phase."""
    if not monitor:
        return {}
    client, lua = monitor.get("client_by_command", {}), monitor.get("lua_by_command", {})
    return {name: count / (count + client.get(name, 0)) for name, count in lua.items()}


def phase_costs(stats: dict[str, tuple[int, int]], share: dict[str, float], n: int, cpu: float) -> dict[str, Any]:
    """µs and commands per job: sent by clients, run inside scripts, and every commandstats line summed."""
    sent_us = inside_us = sent = inside = 0.0
    by_command: dict[str, float] = {}
    for name, (calls, usec) in stats.items():
        part = 0.0 if name in SCRIPT_COMMANDS else share.get(name, 0.0)
        sent_us += usec * (1 - part)
        inside_us += usec * part
        sent += calls * (1 - part)
        inside += calls * part
        if part < 1:
            by_command[name] = round(usec * (1 - part) / n, 2)
    return {
        "us_per_job": round(sent_us / n, 2),
        "us_per_job_every_line": round((sent_us + inside_us) / n, 2),
        "commands_per_job": round(sent / n, 2),
        "inside_scripts_per_job": round(inside / n, 2),
        "redis_cpu_us_per_job": round(cpu / n * 1e6, 1),
        "us_per_job_by_command": dict(sorted(by_command.items(), key=lambda kv: -kv[1])),
    }


def measured(admin: Redis, action: Callable[[], None]) -> tuple[dict[str, tuple[int, int]], float]:
    """commandstats and server CPU of ``action`` alone."""
    admin.call("CONFIG", "RESETSTAT")
    cpu = server_cpu(admin)
    action()
    return commandstats(admin), server_cpu(admin) - cpu


def burst_drain(bench: Bench, peer: Peer, n: int) -> None:
    """The worker with the peer's burst option, until it exits by itself; every job must be done."""
    worker = bench.worker(peer, n, "redis-time", (peer.spec["burst"],))
    worker.start()
    deadline = time.monotonic() + bench.s.drain_timeout
    try:
        while not (gone := worker.exited()):
            if time.monotonic() > deadline:
                raise WorkloadError(f"burst drain: still running after {bench.s.drain_timeout:g} s")
            time.sleep(0.02)
    finally:
        worker.stop(bench.s.stop_grace)
    done = int(bench.counter.call("GET", "bench:done") or 0)  # type: ignore[call-overload]
    if gone != "worker exited with code 0" or done != n:
        raise WorkloadError(f"burst drain: {gone} after {done}/{n} jobs: {worker.log_tail(3)}")


def counted_drain(bench: Bench, peer: Peer, n: int) -> None:
    worker = bench.worker(peer, n, "redis-time")
    try:
        bench.drain(worker, n)
    finally:
        worker.stop(bench.s.stop_grace)


def life_costs(bench: Bench, peer: Peer, n: int, monitor: dict[str, Any]) -> dict[str, Any]:
    """Enqueue and drain of N jobs, each phase alone in commandstats; ``bench`` is on a private server."""
    admin = bench.queue
    bench.flush()

    def enqueue_jobs() -> None:
        bench.driver(peer, "enqueue", n, "--no-floor")

    try:
        enqueue, enqueue_cpu = measured(admin, enqueue_jobs)
        drain_action = burst_drain if peer.spec.get("burst") else counted_drain
        drain, drain_cpu = measured(admin, lambda: drain_action(bench, peer, n))
    finally:
        bench.flush()
    out: dict[str, Any] = {
        "n": n,
        "drain": "worker " + peer.spec["burst"] if peer.spec.get("burst") else "worker, until the counter is N",
        "enqueue": phase_costs(enqueue, inside_share(monitor.get("enqueue")), n, enqueue_cpu),
        "claim_and_outcome": phase_costs(drain, inside_share(monitor.get("drain")), n, drain_cpu),
    }
    out["life_us_per_job"] = round(out["enqueue"]["us_per_job"] + out["claim_and_outcome"]["us_per_job"], 2)
    out["life_commands_per_job"] = round(
        out["enqueue"]["commands_per_job"] + out["claim_and_outcome"]["commands_per_job"], 2
    )
    return out


def life_on_private_server(
    bench: Bench, peers: list[tuple[Peer, dict[str, Any]]], n: int, binary: str
) -> tuple[dict[str, dict[str, Any]], dict[str, list[str]]]:
    """``life_costs`` of each (peer, its MONITOR counts) on one private server; failures by peer."""
    results: dict[str, dict[str, Any]] = {}
    errors: dict[str, list[str]] = {}
    try:
        with private_server(binary) as url:
            private = Bench(replace(bench.s, redis_url=url, counter_redis_url=bench.s.redis_url))
            version = private.queue.info("server").get("redis_version", "?")
            for peer, monitor in peers:
                try:
                    results[peer.name] = {"server": f"redis {version}", **life_costs(private, peer, n, monitor)}
                except (WorkloadError, RedisError, OSError) as exc:
                    errors[peer.name] = [f"redis time: {type(exc).__name__}: {exc}"]
    except (RedisError, OSError) as exc:
        for peer, _ in peers:
            errors.setdefault(peer.name, []).append(f"redis time: no private server: {exc}")
    return results, errors
