"""The tasks page: per task, wait and run time percentiles over the last hour, as plain data and SVG paths.

The figures come from the per-minute histograms the workers write
(``broker/timings.py``), never from job records: one HGETALL per queue and
minute, whatever the number of jobs. The hour's p50 and p95 are worked out
of the hour's histograms merged, not averaged from minutes (percentiles do
not average); the chart's points are each minute's own.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from .. import status
from ..broker.timings import BOUNDS, RATIO, SMALLEST_S, Histogram, TaskTimings, merged, percentile
from ..job import ms_to_datetime

if TYPE_CHECKING:
    from ..app import TaskForge

MINUTES = 60
SERIES = ("wait_p50", "wait_p95", "run_p50", "run_p95")
QUANTILES = {"p50": 0.5, "p95": 0.95}
CHART_WIDTH = 240  # 4 px a minute
CHART_HEIGHT = 60
PAD = 4  # px kept free above and below the lines


def seconds(value: float | None) -> float | None:
    """A time as the JSON shows it: seconds, to the microsecond."""
    return None if value is None else round(value, 6)


def duration(value: float | None) -> str:
    """A time for people: 0.42 ms, 37 ms, 2.5 s, 4.2 min; '–' for none."""
    if value is None:
        return "–"
    if value < 0.001:
        return f"{value * 1000:.2f} ms"
    if value < 1:
        return f"{value * 1000:.3g} ms"
    if value < 60:
        return f"{value:.3g} s"
    return f"{value / 60:.3g} min"


def figures(histogram: Histogram) -> dict[str, float | None]:
    return {name: percentile(histogram, q) for name, q in QUANTILES.items()}


@dataclass(frozen=True)
class TaskRow:
    """One task of one queue: its histograms per minute, and what the page and the JSON show of them."""

    queue: str
    task: str
    timings: TaskTimings

    @property
    def runs(self) -> int:
        return sum(sum(h.values()) for h in self.timings.run)

    def hour(self) -> dict[str, dict[str, float | None]]:
        """The hour's p50 and p95 of wait and run, from the hour's histograms merged (seconds)."""
        return {"wait": figures(merged(self.timings.wait)), "run": figures(merged(self.timings.run))}

    def per_minute(self) -> dict[str, list[float | None]]:
        """Each series, one value a minute, oldest first; None for a minute without a run."""
        series: dict[str, list[float | None]] = {name: [] for name in SERIES}
        for kind, minutes in (("wait", self.timings.wait), ("run", self.timings.run)):
            for histogram in minutes:
                for name, q in QUANTILES.items():
                    series[f"{kind}_{name}"].append(percentile(histogram, q))
        return series

    def to_dict(self) -> dict[str, Any]:
        hour = self.hour()
        return {
            "queue": self.queue,
            "task": self.task,
            "runs": self.runs,
            "wait": {name: seconds(v) for name, v in hour["wait"].items()},
            "run": {name: seconds(v) for name, v in hour["run"].items()},
            "per_minute": {
                "runs": [sum(h.values()) for h in self.timings.run],
                **{name: [seconds(v) for v in values] for name, values in self.per_minute().items()},
            },
        }

    def chart(self) -> dict[str, Any]:
        """The chart's four lines as SVG path data, on a log scale between the hour's extremes.

        A minute without a run breaks its line; a lone minute is a short dash.
        """
        series = self.per_minute()
        values = [v for vs in series.values() for v in vs if v is not None and v > 0]
        low = max(min(values, default=SMALLEST_S), SMALLEST_S / RATIO)
        high = max(values, default=BOUNDS[-1])
        if high <= low * RATIO:  # one value, or close ones: a band of two buckets around them
            low, high = low / RATIO, high * RATIO
        span = math.log(high / low)

        def y(value: float) -> float:
            share = math.log(max(value, low) / low) / span
            return round(CHART_HEIGHT - PAD - share * (CHART_HEIGHT - 2 * PAD), 1)

        paths = {}
        step = CHART_WIDTH / MINUTES
        for name, points in series.items():
            parts: list[str] = []
            for i, value in enumerate(points):
                if value is None:
                    continue
                x = round(i * step + step / 2, 1)
                joined = i > 0 and points[i - 1] is not None
                parts.append(f"{'L' if joined else 'M'}{x} {y(value)}")
                lone = not joined and (i + 1 >= len(points) or points[i + 1] is None)
                if lone:
                    parts.append("h3")
            paths[name] = " ".join(parts)
        return {"paths": paths, "low": low, "high": high, "width": CHART_WIDTH, "height": CHART_HEIGHT}


@dataclass(frozen=True)
class TaskTimes:
    """Every task that ran in the last hour, per queue: the tasks page and ``/api/tasks``."""

    first_minute: datetime
    rows: list[TaskRow]

    def to_dict(self) -> dict[str, Any]:
        return {
            "first_minute": status.iso(self.first_minute),
            "minutes": MINUTES,
            "buckets": {"smallest_s": SMALLEST_S, "ratio": round(RATIO, 6), "count": len(BOUNDS) + 1},
            "tasks": [row.to_dict() for row in self.rows],
        }


def task_times(app: TaskForge, queues: list[str]) -> TaskTimes:
    first, by_queue = app.broker.inspection.task_timings(queues, MINUTES)
    rows = [
        TaskRow(queue, task, timings) for queue in sorted(by_queue) for task, timings in sorted(by_queue[queue].items())
    ]
    return TaskTimes(ms_to_datetime(first) or status.now_utc(), rows)
