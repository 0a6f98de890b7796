"""``taskforge status APP``: queue counts, workflow counts, live workers, the next scheduled job."""

from __future__ import annotations

import json

import click

from .. import status as tf_status
from ..broker.clock import SKEW_WARN_MS
from .common import cli_errors, open_app
from .table import Cell, cell, count, duration, relative, render, timestamp

STATUS_HELP = """Show every queue's counts, the workflows, the live workers and the next scheduled job.

Queues shown: the app's own, then every queue ever enqueued to on this
Redis. PENDING is split by priority (CRIT HIGH NORM LOW). SCHEDULED and
RETRYING share one Redis set; above 500 such jobs in a queue their split
is estimated from a random sample (marked ~). DONE is each live worker's
count of finished runs (any outcome) since it started; per-queue successes
and failures of the last hour are on the dashboard (taskforge dashboard).
EXPIRED counts the jobs that reached their `expires` time unrun in the
last 60 minutes (they end cancelled, "expired").
The workflows line counts those running now, and those that ended (succeeded,
dead, cancelled) within the app's retention. The redis line gives the
server's maxmemory-policy, persistence and replicas, and a WARNING follows
for each way they can lose jobs (eviction, no AOF nor RDB, no replica under
durability="replicated").

\b
Example:
  taskforge status myapp:app
  taskforge status myapp:app --json | jq '.queues[] | {name, pending, dead}'

\b
--json prints one object (schema_version 1; times are ISO 8601 UTC
strings or null, counts are integers):
  schema_version  1
  broker          the broker URL, password replaced by ***
  generated_at    when the snapshot was taken
  queues          [{name, pending, pending_by_priority: {critical, high,
                  normal, low}, scheduled, retrying, running, dead,
                  estimated (true: scheduled/retrying split sampled),
                  next_due, expired_last_hour, paused (true: `taskforge
                  pause` holds its starts), held (pending jobs held
                  back by their task's per-key limits; counted in
                  pending too), deferred (jobs waiting for the jobs
                  they depend on: depends_on)}]
  workers         [{id, host, pid, queues: [name], concurrency, jobs_done,
                  current: [{id, task, queue, started_at}], started_at,
                  heartbeat, clock_offset_ms (its wall clock minus
                  Redis's; times shown are Redis's)}]
  jobs_done       the sum of the workers' jobs_done
  next_due        the soonest next_due of all queues
  periodic        [{task, queue, schedule, next_run}]: the app's periodic tasks
  workflows       {running, succeeded, dead, cancelled}: running now, and
                  ended that way within the app's retention
  server          {summary: [line per Redis server: maxmemory-policy,
                  persistence, replicas], warnings: [each way its settings
                  can lose jobs]}
"""


RUNNING_WIDTH = 50


@click.command(help=STATUS_HELP)
@click.argument("app")
@click.option("--json", "as_json", is_flag=True, help="Print the JSON document described above.")
def status(app: str, as_json: bool) -> None:
    the_app = open_app(app)
    with cli_errors():
        snapshot = tf_status.status(the_app)
        workflows = the_app.broker.ledger.workflow_counts()
        summary, warnings = tf_status.server_report(the_app)
    if as_json:
        server = {"summary": summary, "warnings": warnings}
        click.echo(json.dumps({**snapshot.to_dict(), "workflows": workflows, "server": server}, indent=2))
    else:
        click.echo(format_status(snapshot, workflows, the_app.retention) + server_lines(summary, warnings))


def server_lines(summary: list[str], warnings: list[str]) -> str:
    """'redis: maxmemory-policy noeviction, persistence AOF, 0 replicas', then each risk in yellow."""
    lines = [f"redis: {line}" for line in summary]
    lines += [click.style("WARNING", fg="yellow", bold=True) + f": {text}" for text in warnings]
    return "\n".join(["", *lines]) if lines else ""


def format_status(snapshot: tf_status.Status, workflows: dict[str, int] | None = None, retention: float = 0) -> str:
    parts = [f"broker {snapshot.broker}", "", queue_table(snapshot), ""]
    if workflows is not None:
        parts += [workflow_line(workflows, retention), ""]
    if snapshot.workers:
        parts.append(worker_table(snapshot))
    else:
        parts.append(click.style("no live workers", fg="yellow") + ": start one with `taskforge worker APP`")
    parts.append("")
    if snapshot.periodic:
        rows = [
            [
                cell(p.task, bold=True),
                cell(p.queue),
                cell(p.schedule),
                cell(f"{relative(p.next_run, snapshot.generated_at)} ({timestamp(p.next_run)})"),
            ]
            for p in snapshot.periodic
        ]
        parts += [render(["PERIODIC TASK", "QUEUE", "SCHEDULE", "NEXT RUN"], rows), ""]
    due = snapshot.next_due
    if due is None:
        parts.append("next scheduled job: none")
    else:
        parts.append(f"next scheduled job: {relative(due, snapshot.generated_at)} ({timestamp(due)})")
    return "\n".join(parts)


def queue_table(snapshot: tf_status.Status) -> str:
    headers = [
        "QUEUE",
        "PENDING",
        "CRIT",
        "HIGH",
        "NORM",
        "LOW",
        "SCHEDULED",
        "RETRYING",
        "HELD",
        "DEFERRED",
        "RUNNING",
        "DEAD",
        "EXPIRED",
        "NEXT DUE",
    ]
    rows = []
    for q in snapshot.queues:
        by = q.pending_by_priority
        mark = "~" if q.estimated else ""
        rows.append(
            [
                Cell(f"{q.name} (paused)", bold=True, fg="yellow") if q.paused else cell(q.name, bold=True),
                count(q.pending, "cyan"),
                cell(by["critical"]),
                cell(by["high"]),
                cell(by["normal"]),
                cell(by["low"]),
                Cell(f"{mark}{q.scheduled}", right=True),
                Cell(f"{mark}{q.retrying}", fg="yellow" if q.retrying else None, right=True),
                count(q.held, "yellow"),
                count(q.deferred, "yellow"),
                count(q.running, "green"),
                count(q.dead, "red"),
                count(q.expired_last_hour, "magenta"),
                cell(relative(q.next_due, snapshot.generated_at)),
            ]
        )
    return render(headers, rows)


def workflow_line(counts: dict[str, int], retention: float) -> str:
    """'workflows: 2 running; in the last 1 day (retention): 5 succeeded, 1 dead, 0 cancelled'."""
    ended = ", ".join(
        f"{click.style(str(counts[state]), fg=colour) if counts[state] else 0} {state}"
        for state, colour in (("succeeded", "green"), ("dead", "red"), ("cancelled", "magenta"))
    )
    running = click.style(str(counts["running"]), fg="cyan") if counts["running"] else "0"
    return f"workflows: {running} running; in the last {duration(retention)} (retention): {ended}"


def worker_table(snapshot: tf_status.Status) -> str:
    headers = ["WORKER", "HOST", "PID", "CONC", "RUNNING", "DONE", "QUEUES", "HEARTBEAT", "CLOCK"]
    rows = []
    for w in snapshot.workers:
        running = ", ".join(str(job["task"]) for job in w.current)
        if len(running) > RUNNING_WIDTH:
            running = running[: RUNNING_WIDTH - 3] + "..."
        rows.append(
            [
                cell(w.id),
                cell(w.host),
                cell(w.pid),
                cell(w.concurrency),
                cell(f"{len(w.current)} {running}" if w.current else "0"),
                cell(w.jobs_done),
                cell(",".join(w.queues)),
                cell(relative(w.heartbeat, snapshot.generated_at)),
                clock_cell(w.clock_offset_ms),
            ]
        )
    return render(headers, rows)


def clock_cell(offset_ms: int) -> Cell:
    """'ok', or how far the worker's wall clock is off Redis's (in yellow: its logs' times are off too)."""
    if abs(offset_ms) <= SKEW_WARN_MS:
        return cell("ok")
    return Cell(f"{offset_ms / 1000:+.1f} s", fg="yellow")
