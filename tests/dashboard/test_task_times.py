"""The tasks page's data and chart, in process, on memory:// and Redis: per task, wait and run p50 and p95."""

from __future__ import annotations

import re
import time

from taskforge import TaskForge
from taskforge.broker.timings import BOUNDS, bucket_of
from taskforge.dashboard import tasks
from taskforge.dashboard.pages import make_templates

SERIES = {"wait_p50", "wait_p95", "run_p50", "run_p95"}


def render(times: tasks.TaskTimes) -> str:
    template = make_templates().env.get_template("tasks.html")
    return template.render(times=times, partial=True, nav="tasks", broker="", csrf="", csrf_field="csrf")


def test_each_task_gets_its_hour_figures_and_a_chart_of_four_series(app: TaskForge) -> None:
    slept: list[float] = []  # each nap's own measure (app.drain runs them in this process)

    @app.task(name="t.nap")
    def nap(seconds):
        start = time.perf_counter()
        time.sleep(seconds)
        slept.append(time.perf_counter() - start)

    @app.task(name="t.other", queue="other")
    def other():
        return 1

    for _ in range(4):
        nap.delay(0.03)
    other.delay()
    app.drain()
    times = tasks.task_times(app, ["default", "other", "idle"])
    shown = times.to_dict()
    assert shown["minutes"] == 60 and shown["buckets"]["count"] == 53
    by_task = {(row["queue"], row["task"]): row for row in shown["tasks"]}
    nap_row = by_task[("default", "t.nap")]
    assert set(nap_row) == {"queue", "task", "runs", "wait", "run", "per_minute"}
    assert nap_row["runs"] == 4 and set(nap_row["run"]) == {"p50", "p95"}
    # Never under the 0.03 s nap's bucket; under load a nap runs longer: at most a bucket above the longest
    # a run measured itself (the worker's own time around the call).
    p50 = nap_row["run"]["p50"]
    assert BOUNDS[bucket_of(0.03) - 1] <= p50 <= BOUNDS[bucket_of(max(slept)) + 1], (p50, slept)
    assert p50 <= nap_row["run"]["p95"]
    assert nap_row["wait"]["p50"] is not None and nap_row["wait"]["p50"] >= 0
    assert set(nap_row["per_minute"]) == {"runs", *SERIES}
    assert all(len(values) == 60 for values in nap_row["per_minute"].values())
    assert sum(nap_row["per_minute"]["runs"]) == 4
    html = render(times)
    row = re.search(r'<tr data-queue="default" data-task="t.nap">.*?</tr>', html, re.S)
    assert row is not None
    classes = set(re.findall(r'<path class="(\w+)" d="M[\d.]+ [\d.]+', row.group(0)))
    assert classes == SERIES
    assert re.search(r'class="num run-p50">\d[\d.]* ms<', row.group(0))


def test_no_run_no_row(app: TaskForge) -> None:
    times = tasks.task_times(app, ["default"])
    assert times.rows == [] and "No run in the last hour" in render(times)


def test_a_minute_without_runs_breaks_the_line() -> None:
    histograms: list[dict[int, int]] = [{} for _ in range(60)]
    runs = [dict(h) for h in histograms]
    for minute in (10, 11, 30):
        runs[minute] = {20: 3}
    row = tasks.TaskRow("q", "t", tasks.TaskTimings(histograms, runs))
    path = row.chart()["paths"]["run_p50"]
    assert path.count("M") == 2 and path.count("L") == 1 and path.endswith("h3")
    assert row.chart()["paths"]["wait_p50"] == ""


def test_durations_read_well() -> None:
    assert [tasks.duration(v) for v in (None, 0.00042, 0.037, 2.5, 252)] == [
        "–",
        "0.42 ms",
        "37 ms",
        "2.5 s",
        "4.2 min",
    ]
