"""Medians, JSON lines, the Markdown table, and taskforge's standing against the targets of issue #6."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Any

# metric -> (workload, unit, higher is better, label in the table)
METRICS: dict[str, tuple[str, str, bool, str]] = {
    "enqueue_jobs_per_s": ("W1", "jobs/s", True, "W1 enqueue jobs/s"),
    "floor_set_per_s": ("W1", "SET/s", True, "bare SET loop /s"),
    "enqueue_vs_floor": ("W1", "ratio", True, "W1 / SET floor"),
    "async_floor_set_per_s": ("W1", "SET/s", True, "asyncio SET loop /s"),
    "bulk_jobs_per_s": ("W1b", "jobs/s", True, "W1b bulk jobs/s"),
    "drain_from_start_jobs_per_s": ("W2", "jobs/s", True, "W2 drain jobs/s, from worker start"),
    "drain_first_to_last_jobs_per_s": ("W2", "jobs/s", True, "W2 drain jobs/s, first→last"),
    "drain_startup_s": ("W2", "s", False, "W2 worker start → first job"),
    "latency_p50_ms": ("W3", "ms", False, "W3 p50 ms"),
    "latency_p99_ms": ("W3", "ms", False, "W3 p99 ms"),
    "latency_max_ms": ("W3", "ms", False, "W3 max ms"),
    "worker_start_s": ("start", "s", False, "worker spawn → first job started, s"),
}
TABLE_COLUMNS = [
    "enqueue_jobs_per_s",
    "floor_set_per_s",
    "enqueue_vs_floor",
    "bulk_jobs_per_s",
    "drain_from_start_jobs_per_s",
    "drain_first_to_last_jobs_per_s",
    "drain_startup_s",
    "latency_p50_ms",
    "latency_p99_ms",
    "worker_start_s",
]


@dataclass
class Summary:
    median: float
    low: float
    high: float
    values: list[float]


def summarize(values: list[float]) -> Summary | None:
    values = [v for v in values if not math.isnan(v)]
    if not values:
        return None
    return Summary(statistics.median(values), min(values), max(values), values)


def fmt(value: float, unit: str) -> str:
    if unit == "ratio":
        return f"{value:.2f}"
    if unit in ("ms", "s"):
        return f"{value:.2f}" if value < 100 else f"{value:.0f}"
    return f"{value:,.0f}"


def cell(summary: Summary | None, unit: str) -> str:
    if summary is None:
        return "—"
    if len(summary.values) == 1:
        return fmt(summary.median, unit)
    return f"{fmt(summary.median, unit)} ({fmt(summary.low, unit)}–{fmt(summary.high, unit)})"


@dataclass
class Results:
    runs: int
    n: int
    per_peer: dict[str, dict[str, list[float]]] = field(default_factory=dict)
    commands: dict[str, dict[str, Any]] = field(default_factory=dict)
    errors: dict[str, list[str]] = field(default_factory=dict)
    scripts: dict[str, dict[str, float]] = field(default_factory=dict)  # taskforge's Redis time per script
    memory: dict[str, dict[str, Any]] = field(default_factory=dict)  # bytes per job (redis_memory.py)
    redis_time: dict[str, dict[str, Any]] = field(default_factory=dict)  # Redis µs per job's life (redis_time.py)

    def add_round(self, peer: str, metrics: dict[str, float], errors: list[str]) -> None:
        bucket = self.per_peer.setdefault(peer, {})
        for key, value in metrics.items():
            bucket.setdefault(key, []).append(value)
        if errors:
            self.errors.setdefault(peer, []).extend(errors)

    def summary(self, peer: str, metric: str) -> Summary | None:
        return summarize(self.per_peer.get(peer, {}).get(metric, []))

    def json_lines(self) -> list[dict[str, Any]]:
        lines = []
        for peer, metrics in self.per_peer.items():
            for metric, values in metrics.items():
                s = summarize(values)
                if s is None:
                    continue
                workload, unit, _, _ = METRICS.get(metric, ("?", "", True, metric))
                lines.append(
                    {
                        "type": "result",
                        "peer": peer,
                        "workload": workload,
                        "metric": metric,
                        "unit": unit,
                        "median": round(s.median, 4),
                        "min": round(s.low, 4),
                        "max": round(s.high, 4),
                        "values": [round(v, 4) for v in s.values],
                        "runs": len(s.values),
                        "n": self.n,
                    }
                )
        for peer, data in self.commands.items():
            lines.append({"type": "commands", "peer": peer, **data})
        for peer, errs in self.errors.items():
            for err in errs:
                lines.append({"type": "error", "peer": peer, "error": err})
        return lines

    # -- Markdown ------------------------------------------------------------

    def results_table(self, peers: list[str]) -> list[str]:
        head = "| library | " + " | ".join(METRICS[c][3] for c in TABLE_COLUMNS) + " |"
        rows = [head, "|" + "---|" * (len(TABLE_COLUMNS) + 1)]
        for peer in peers:
            cells = [cell(self.summary(peer, c), METRICS[c][1]) for c in TABLE_COLUMNS]
            rows.append(f"| {peer} | " + " | ".join(cells) + " |")
        return rows

    def commands_table(self, peers: list[str]) -> list[str]:
        rows = [
            "| library | enqueue: client + inside Lua = total per job | drain (claim + success): client + "
            "inside Lua = total per job | bulk: client per job | idle worker: client / total cmds/s | "
            "drain client commands (per job) |",
            "|---|---|---|---|---|---|",
        ]
        for peer in peers:
            data = self.commands.get(peer)
            if not data:
                rows.append(f"| {peer} | — | — | — | — | — |")
                continue
            enq, drain, bulk = data.get("enqueue"), data.get("drain"), data.get("bulk")
            top = ", ".join(
                f"{name} {count / data['n']:.2f}"
                for name, count in list((drain or {}).get("client_by_command", {}).items())[:5]
            )
            rows.append(
                f"| {peer} | {_sum(enq)} | {_sum(drain)} | {_num(bulk, 'client_per_job')} | "
                f"{data.get('idle_client_per_s', '—')} / {data.get('idle_total_per_s', '—')} | {top or '—'} |"
            )
        return rows

    # -- targets ---------------------------------------------------------------

    def targets(self) -> list[dict[str, Any]]:
        """Issue #15's targets: the best taskforge shape for each workload against the best other library."""
        check = TargetCheck(self)
        check.throughput()
        check.latency_and_start()
        check.commands()
        return check.out


class TargetCheck:
    """Compares taskforge's best worker shape with the best of the others, as issue #15 states its goals."""

    def __init__(self, results: Results) -> None:
        self.results = results
        self.mine = [p for p in results.per_peer if p.startswith("taskforge")]
        self.others = [p for p in results.per_peer if not p.startswith("taskforge")]
        self.out: list[dict[str, Any]] = []

    def best(self, metric: str, peers: list[str]) -> tuple[str, float] | None:
        higher = METRICS[metric][2]
        cands = [(p, s.median) for p in peers if (s := self.results.summary(p, metric))]
        if not cands:
            return None
        return (max if higher else min)(cands, key=lambda pv: pv[1])

    def add(self, target: str, value: float, goal: str, met: bool, against: str) -> None:
        self.out.append(
            {"type": "target", "target": target, "value": value, "goal": goal, "met": met, "against": against}
        )

    def ratio(self, metric: str, label: str, goal: float) -> None:
        mine, top = self.best(metric, self.mine), self.best(metric, self.others)
        if mine and top:
            ratio = mine[1] / top[1]
            self.add(
                label,
                round(ratio, 2),
                f">= {goal:.1f}",
                ratio >= goal,
                f"{mine[0]} {mine[1]:,.0f} vs {top[0]} {top[1]:,.0f}",
            )

    def throughput(self) -> None:
        self.ratio("drain_first_to_last_jobs_per_s", "W2 drain (first→last) >= 2.0x the best peer", 2.0)
        self.ratio("drain_from_start_jobs_per_s", "W2 drain (from worker start) >= 2.0x the best peer", 2.0)
        self.ratio("enqueue_jobs_per_s", "W1 .delay() >= 1.0x the best peer", 1.0)

    def latency_and_start(self) -> None:
        mine, top = self.best("latency_p50_ms", self.mine), self.best("latency_p50_ms", self.others)
        if mine and top:
            self.add(
                "W3 p50 <= the best peer's",
                round(mine[1], 3),
                f"<= {top[1]:.3f} ms",
                mine[1] <= top[1],
                f"{mine[0]} vs {top[0]}",
            )
        p99 = self.best("latency_p99_ms", self.mine)
        if p99:
            self.add("W3 p99 < 2 ms", round(p99[1], 3), "< 2.0 ms", p99[1] < 2.0, p99[0])
        start, huey = self.best("worker_start_s", self.mine), self.results.summary("huey", "worker_start_s")
        if start and huey:
            ratio = start[1] / huey.median
            self.add(
                "worker start <= 2x Huey's",
                round(ratio, 2),
                "<= 2.0",
                ratio <= 2.0,
                f"{start[0]} {start[1]:.2f} s vs huey {huey.median:.2f} s",
            )

    def commands(self) -> None:
        for peer in self.mine:
            cmds = self.results.commands.get(peer, {})
            for phase, goal in (("enqueue", 5.0), ("drain", 8.0)):
                if cmds.get(phase):
                    d = cmds[phase]
                    what = "enqueue" if phase == "enqueue" else "claim + success"
                    self.add(
                        f"{peer}: {what} <= {goal:g} commands per job, Lua's included",
                        d["total_per_job"],
                        f"<= {goal:g}",
                        d["total_per_job"] <= goal,
                        f"{d['client_per_job']} client + {d['lua_per_job']} inside Lua",
                    )
            if "idle_total_per_s" in cmds:
                idle = cmds["idle_total_per_s"]
                self.add(
                    f"{peer}: idle <= 3 commands/s", idle, "<= 3", idle <= 3.0, f"{cmds['idle_client_per_s']} client"
                )


def _num(data: dict[str, Any] | None, key: str) -> str:
    if not data or data.get(key) is None:
        return "—"
    return f"{data[key]:.2f}"


def _sum(data: dict[str, Any] | None) -> str:
    if not data:
        return "—"
    return f"{data['client_per_job']:.2f} + {data['lua_per_job']:.2f} = **{data['total_per_job']:.2f}**"


def targets_table(targets: list[dict[str, Any]]) -> list[str]:
    rows = ["| target (issue #15 unless named) | taskforge | goal | met? | compared with |", "|---|---|---|---|---|"]
    for t in targets:
        verdict = {True: "yes", False: "**no**", None: "—"}[t["met"]]
        rows.append(f"| {t['target']} | {t['value']} | {t['goal']} | {verdict} | {t['against']} |")
    return rows
