"""What each job costs Redis (issue #50): the memory and Redis-time passes, their tables and targets.

The passes themselves are in ``redis_memory.py`` and ``redis_time.py``;
this module runs them for the libraries of a run and writes what they found.
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from typing import Any

from .peers import Peer
from .redis_memory import memory_per_job
from .redis_time import life_on_private_server
from .report import Results
from .workloads import Bench, WorkloadError, log

# What a library keeps of a finished job by default, for the report.
KEEPS = {
    "taskforge": "its records, for the default retention (a day)",
    "rq": "its jobs, for result_ttl (500 s), in the finished registry",
    "huey": "nothing (a task's None result is not stored)",
    "dramatiq": "nothing (no results backend)",
}
MONITOR_N = 300  # jobs for a MONITOR count run only to split the commandstats lines


def run(bench: Bench, ready: list[Peer], opts: argparse.Namespace, results: Results) -> None:
    """Memory per job for each library (one shape of each), then Redis time per job's life for each.

    ``--drain-timeout`` bounds a drain of ``--n`` jobs; these passes drain
    more (20,000 against 10,000; quick 5,000 against 1,000), so it is scaled
    to their N: RQ drains 20,000 in about two minutes on a loaded 2-core machine.
    """
    scale = max(1.0, max(opts.mem_n, opts.time_n) / opts.n)
    bench = Bench(replace(bench.s, drain_timeout=bench.s.drain_timeout * scale))
    if opts.mem_n > 0:
        for peer in ready:
            if "venv" in peer.spec:
                continue  # another worker shape of a library already measured: same records
            log(f"[memory] {peer.name}")
            data, errors = memory_per_job(bench, peer, opts.mem_n)
            results.memory[peer.name] = data
            note(results, peer, errors)
    if opts.time_n > 0:
        counted = []
        for peer in ready:
            if not results.commands.get(peer.name):
                log(f"[commands] {peer.name} ({MONITOR_N} jobs, to split script commands in the Redis time)")
                try:
                    results.commands[peer.name], errors = bench.count_commands(peer, MONITOR_N, 0.0)
                except WorkloadError as exc:
                    errors = [f"commands: {exc}"]
                note(results, peer, errors)
            counted.append((peer, results.commands.get(peer.name, {})))
        log(f"[redis time] {', '.join(p.name for p in ready)} on a private {opts.redis_server}")
        times, failures = life_on_private_server(bench, counted, opts.time_n, opts.redis_server)
        results.redis_time.update(times)
        for peer in ready:
            note(results, peer, failures.get(peer.name, []))


def note(results: Results, peer: Peer, errors: list[str]) -> None:
    for err in errors:
        log(f"  {peer.name}: {err}")
    if errors:
        results.errors.setdefault(peer.name, []).extend(errors)


def json_lines(results: Results) -> list[dict[str, Any]]:
    lines: list[dict[str, Any]] = []
    for peer, data in results.memory.items():
        lines.append({"type": "memory", "peer": peer, "keeps_when_finished": keeps(peer), **data})
    for peer, data in results.redis_time.items():
        lines.append({"type": "redis_time", "peer": peer, **data})
    return lines


def keeps(peer: str) -> str:
    return KEEPS.get(peer.split("_")[0], "its default")


def _b(data: dict[str, Any] | None, key: str = "bytes_per_job") -> str:
    """Whole bytes; a delta of a few bytes either side of zero is noise (allocator, client buffers): 0."""
    if not data:
        return "—"
    return f"{data[key]:,.0f}" if abs(data[key]) >= 2 else "0"


def memory_table(results: Results) -> list[str]:
    rows = [
        "| library | bytes per queued job | bytes per finished job kept | what the default keeps of a finished job "
        "| keys per job, queued / finished | other clients connected |",
        "|---|---|---|---|---|---|",
    ]
    for peer, data in results.memory.items():
        queued, finished = data.get("queued"), data.get("finished")
        per_key = " / ".join(f"{d['keys'] / data['n']:.2f}" if d else "—" for d in (queued, finished))
        others = max((d or {}).get("other_clients", 0) for d in (queued, finished))
        rows.append(f"| {peer} | **{_b(queued)}** | **{_b(finished)}** | {keeps(peer)} | {per_key} | {others} |")
    return rows


def breakdown_table(results: Results) -> list[str]:
    rows = [
        "| library | state | key kind | type (encoding) | keys | bytes per key | bytes per job |",
        "|---|---|---|---|---|---|---|",
    ]
    for peer, data in results.memory.items():
        for state in ("queued", "finished"):
            part = data.get(state)
            if not part:
                continue
            for kind, entry in part["kinds"].items():
                rows.append(
                    f"| {peer} | {state} | `{kind}` | {entry['type']} ({entry['encoding']}) | {entry['keys']:,} | "
                    f"{entry['bytes_per_key']:,.1f} | {entry['bytes_per_job']:,.1f} |"
                )
            rows.append(
                f"| {peer} | {state} | (in no key: keyspace tables, expiry entries, allocator) | | | | "
                f"{part['bytes_outside_keys_per_job']:,.1f} |"
            )
    return rows


def record_fields(results: Results) -> list[str]:
    """One sample record's fields and value sizes, per library and state: what a record is made of."""
    lines = []
    for peer, data in results.memory.items():
        for state in ("queued", "finished"):
            for kind, entry in (data.get(state) or {}).get("kinds", {}).items():
                fields = entry.get("sample_fields")
                if fields:
                    listed = ", ".join(f"`{name}` {size}" for name, size in fields.items())
                    lines.append(f"- {peer}, {state}, `{kind}` ({len(fields)} fields; value bytes): {listed}")
    return lines


def time_table(results: Results) -> list[str]:
    rows = [
        "| library | life: Redis µs per job | enqueue µs / commands (+ inside scripts) per job | claim + outcome "
        "µs / commands (+ inside scripts) per job | every commandstats line summed, µs per job | Redis CPU µs "
        "per job (enqueue + drain) | drain | most Redis time in the drain, µs per job |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for peer, data in results.redis_time.items():
        enq, drain = data["enqueue"], data["claim_and_outcome"]
        top = ", ".join(f"{name} {us:g}" for name, us in list(drain["us_per_job_by_command"].items())[:4])
        rows.append(
            f"| {peer} | **{data['life_us_per_job']:.1f}** | {_phase(enq)} | {_phase(drain)} | "
            f"{enq['us_per_job_every_line'] + drain['us_per_job_every_line']:.1f} | "
            f"{enq['redis_cpu_us_per_job'] + drain['redis_cpu_us_per_job']:.1f} | {data['drain']} | {top} |"
        )
    return rows


def _phase(d: dict[str, Any]) -> str:
    return f"{d['us_per_job']:.1f} / {d['commands_per_job']:.2f} (+ {d['inside_scripts_per_job']:.2f})"


def targets(results: Results) -> list[dict[str, Any]]:
    """Issue #50's lines on what a job costs Redis, for each taskforge shape measured."""
    out = []
    for peer, data in results.memory.items():
        for state, goal in (("queued", 450), ("finished", 400)):
            part = data.get(state) if peer.startswith("taskforge") else None
            if part:
                value = part["bytes_per_job"]
                out.append(_target(f"{peer}: Redis memory per {state} job <= {goal} B (issue #50)", value, goal))
    for peer, data in results.redis_time.items():
        if peer.startswith("taskforge"):
            value = data["life_us_per_job"]
            out.append(_target(f"{peer}: Redis time per job's life <= 30 µs (issue #50)", value, 30))
    return out


def _target(label: str, value: float, goal: float) -> dict[str, Any]:
    return {
        "type": "target",
        "target": label,
        "value": value,
        "goal": f"<= {goal:g}",
        "met": value <= goal,
        "against": "absolute",
    }
