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
            "| library | enqueue: client cmds/job | drain: client cmds/job | enqueue + drain | "
            "bulk: client cmds/job | inside Lua, enqueue / drain | idle worker cmds/s | "
            "drain commands (per job) |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for peer in peers:
            data = self.commands.get(peer)
            if not data:
                rows.append(f"| {peer} | — | — | — | — | — | — | — |")
                continue
            enq, drain, bulk = data.get("enqueue"), data.get("drain"), data.get("bulk")
            total = (enq["client_per_job"] + drain["client_per_job"]) if enq and drain else None
            top = ", ".join(
                f"{name} {count / data['n']:.2f}"
                for name, count in list((drain or {}).get("client_by_command", {}).items())[:5]
            )
            rows.append(
                f"| {peer} | {_num(enq, 'client_per_job')} | {_num(drain, 'client_per_job')} | "
                f"{'—' if total is None else f'{total:.2f}'} | {_num(bulk, 'client_per_job')} | "
                f"{_num(enq, 'lua_per_job')} / {_num(drain, 'lua_per_job')} | "
                f"{data.get('idle_client_per_s', '—')} | {top or '—'} |"
            )
        return rows

    # -- targets ---------------------------------------------------------------

    def targets(self, subject: str = "taskforge") -> list[dict[str, Any]]:
        """Issue #6's targets for ``subject``, each with its value, what it is compared to, and a verdict."""
        check = TargetCheck(self, subject)
        check.throughput()
        check.latency_and_commands()
        return check.out


class TargetCheck:
    """Compares one library's medians with the best of the others, as issue #6 states its goals."""

    def __init__(self, results: Results, subject: str) -> None:
        self.results = results
        self.subject = subject
        self.others = [p for p in results.per_peer if p != subject]
        self.out: list[dict[str, Any]] = []

    def med(self, metric: str, peer: str | None = None) -> float | None:
        s = self.results.summary(peer or self.subject, metric)
        return None if s is None else s.median

    def best(self, metric: str) -> tuple[str, float] | None:
        higher = METRICS[metric][2]
        cands = [(p, s.median) for p in self.others if (s := self.results.summary(p, metric))]
        if not cands:
            return None
        return (max if higher else min)(cands, key=lambda pv: pv[1])

    def add(self, target: str, value: float, goal: str, met: bool, against: str) -> None:
        self.out.append(
            {"type": "target", "target": target, "value": value, "goal": goal, "met": met, "against": against}
        )

    def throughput(self) -> None:
        for metric, label in (
            ("drain_from_start_jobs_per_s", "from worker start"),
            ("drain_first_to_last_jobs_per_s", "first→last"),
        ):
            mine, top = self.med(metric), self.best(metric)
            if mine is not None and top:
                ratio = mine / top[1]
                self.add(
                    f"W2 drain ({label}) >= 2.0x fastest peer",
                    round(ratio, 2),
                    ">= 2.0",
                    ratio >= 2.0,
                    f"{top[0]} {top[1]:,.0f} jobs/s vs {mine:,.0f}",
                )
        mine, top = self.med("enqueue_jobs_per_s"), self.best("enqueue_jobs_per_s")
        if mine is not None and top:
            ratio = mine / top[1]
            self.add(
                "W1 enqueue >= 1.0x fastest peer",
                round(ratio, 2),
                ">= 1.0",
                ratio >= 1.0,
                f"{top[0]} {top[1]:,.0f} jobs/s vs {mine:,.0f}",
            )
        floor_ratio = self.med("enqueue_vs_floor")
        if floor_ratio is not None:
            self.add(
                "W1 enqueue >= 80% of the bare SET loop",
                round(floor_ratio, 2),
                ">= 0.80",
                floor_ratio >= 0.8,
                f"SET loop {self.med('floor_set_per_s') or 0:,.0f}/s in the same process",
            )
        mine, rq = self.med("bulk_jobs_per_s"), self.med("bulk_jobs_per_s", "rq")
        if mine is not None and rq is not None:
            ratio = mine / rq
            self.add(
                "W1b bulk >= 3x RQ enqueue_many",
                round(ratio, 2),
                ">= 3.0",
                ratio >= 3.0,
                f"rq {rq:,.0f} jobs/s vs {mine:,.0f}",
            )

    def latency_and_commands(self) -> None:
        mine, top = self.med("latency_p50_ms"), self.best("latency_p50_ms")
        if mine is not None and top:
            self.add(
                "W3 p50 no worse than the best peer",
                round(mine, 3),
                f"<= {top[1]:.3f} ms ({top[0]})",
                mine <= top[1],
                f"{top[0]} p50 {top[1]:.3f} ms",
            )
        p99 = self.med("latency_p99_ms")
        if p99 is not None:
            self.add("W3 p99 < 2 ms", round(p99, 3), "< 2.0 ms", p99 < 2.0, "absolute")
        cmds = self.results.commands.get(self.subject, {})
        if cmds.get("enqueue") and cmds.get("drain"):
            total = cmds["enqueue"]["client_per_job"] + cmds["drain"]["client_per_job"]
            self.add(
                "<= 3 client commands per job, enqueue + drain",
                round(total, 3),
                "<= 3",
                total <= 3.0,
                f"enqueue {cmds['enqueue']['client_per_job']} + drain {cmds['drain']['client_per_job']}",
            )


def _num(data: dict[str, Any] | None, key: str) -> str:
    if not data or data.get(key) is None:
        return "—"
    return f"{data[key]:.2f}"


def targets_table(targets: list[dict[str, Any]]) -> list[str]:
    rows = ["| target (issue #6) | taskforge | goal | met? | compared with |", "|---|---|---|---|---|"]
    for t in targets:
        verdict = {True: "yes", False: "**no**", None: "—"}[t["met"]]
        rows.append(f"| {t['target']} | {t['value']} | {t['goal']} | {verdict} | {t['against']} |")
    return rows
