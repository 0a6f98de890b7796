"""``taskforge job APP JOB_ID``: one job's whole record."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager

import click

from ..depending import waits_for
from ..errors import JobNotFound
from ..job import JobInfo, JobState
from ..job_json import job_to_json, jsonable
from ..printable import printable
from .common import USAGE, cli_errors, fail, open_app

JOB_HELP = """Show one job's record: state, attempts, times, arguments, result, error.

\b
Example:
  taskforge job myapp:app 3f2a9c0d5e8b4a61a7c2e9f01b3d5c77
  taskforge job myapp:app 3f2a9c0d5e8b4a61a7c2e9f01b3d5c77 --json | jq .state

--json prints one object with exactly the field names of JobInfo: id, task,
queue, args, kwargs, priority (low, normal, high, critical), state, attempts,
max_attempts, created_at, scheduled_at, started_at, finished_at (ISO 8601
UTC or null), error, traceback, result, progress, progress_message, failure
(why the latest attempt failed, a FailureKind value: exception, retry,
timeout, crashed, worker_lost, unknown_task, serialization, corrupt, aborted,
expired, interrupted; or null), headers (an object of strings, {} for a job sent without
any), error_type (the class path of that failure's error, such as
"builtins.ValueError" or "taskforge.errors.HardTimeout"; or null),
progress_meta (the meta of set_progress, or null), key (the job's key, or
null), held (why a pending job waits: its queue paused, or its key's limits
reached; or null), steps (an object: each finished durable step's result by
its name, {} for none), stream_length (how many items the job streamed, 0
for none), losses (runs whose worker was lost under them: they use no
attempt), interrupted (runs a worker's shutdown cut short: the same).
Values in args, kwargs, result, progress_meta and steps that JSON has no type for are rendered:
datetime, date, time as ISO 8601 strings; timedelta as seconds; UUID and
Decimal as strings; tuple as an array; set and frozenset as sorted arrays;
bytes as {"$bytes": "<base64>"}; NaN and infinities as the strings "NaN",
"Infinity", "-Infinity"; non-string dict keys as their JSON text.

An unknown id (never existed, or finished longer ago than the app's
retention) exits with status 2.
"""

STATE_COLOURS = {
    JobState.SUCCEEDED: "green",
    JobState.RUNNING: "cyan",
    JobState.RETRYING: "yellow",
    JobState.DEAD: "red",
    JobState.CANCELLED: "magenta",
    JobState.DEFERRED: "yellow",
}


@contextmanager
def missing_is_usage() -> Iterator[None]:
    """An unknown job id is the caller's mistake, like a bad option: exit 2."""
    try:
        yield
    except JobNotFound as exc:
        fail(str(exc), USAGE)


@click.command(help=JOB_HELP)
@click.argument("app")
@click.argument("job_id")
@click.option("--json", "as_json", is_flag=True, help="Print the JobInfo fields as one JSON object.")
def job(app: str, job_id: str, as_json: bool) -> None:
    the_app = open_app(app)
    with cli_errors(), missing_is_usage():
        info = the_app.job(job_id).info()
        parents = waits_for(the_app, info.queue, info.id)
    if as_json:
        click.echo(json.dumps(job_to_json(info), indent=2))
    else:
        click.echo(format_job(info, parents))


def free_runs(info: JobInfo) -> list[tuple[str, str]]:
    """The runs that used no attempt: lost with their worker, or cut short by a shutdown (none: no row)."""
    rows = []
    if info.losses:
        rows.append(("lost runs", f"{info.losses} (worker killed or crashed; no attempt used)"))
    if info.interrupted:
        rows.append(("interrupted", f"{info.interrupted} (cut short by a worker's shutdown; no attempt used)"))
    return rows


def format_job(info: JobInfo, parents: list[tuple[str, str, str]] | None = None) -> str:
    """The record as rows; ``parents``: what it waits for (``depends_on``), each job's queue, id, state."""
    data = info.to_dict()
    rows = [
        ("id", printable(info.id)),
        ("task", printable(info.task)),
        ("queue", printable(info.queue)),
        ("state", click.style(info.state.value, fg=STATE_COLOURS.get(info.state), bold=True)),
        ("priority", data["priority"]),
        ("attempts", f"{info.attempts} of {info.max_attempts}"),
        ("created_at", data["created_at"] or "-"),
        ("scheduled_at", data["scheduled_at"] or "-"),
        ("started_at", data["started_at"] or "-"),
        ("finished_at", data["finished_at"] or "-"),
        ("args", repr(info.args)),
        ("kwargs", repr(info.kwargs)),
    ]
    if info.key is not None:
        rows.append(("key", printable(info.key)))
    if info.held is not None:
        rows.append(("held back", click.style(printable(info.held), fg="yellow")))
    waits = "waits for" if info.state is JobState.DEFERRED else "depended on"
    rows += [(waits, f"{printable(job)} ({state}, queue {printable(q)})") for q, job, state in parents or ()]
    rows += [(f"header {printable(name)}", printable(value)) for name, value in info.headers.items()]
    rows += [(f"step {name}", repr(value)) for name, value in info.steps.items()]
    rows += free_runs(info)
    if info.stream_length:
        rows.append(("stream", f"{info.stream_length} items (JobHandle.stream() reads them)"))
    if info.state is JobState.SUCCEEDED:
        rows.append(("result", repr(info.result)))
    if info.progress is not None:
        rows.append(("progress", f"{info.progress:.0%} {info.progress_message or ''}".rstrip()))
    if info.progress_meta is not None:
        rows.append(("progress meta", json.dumps(jsonable(info.progress_meta), ensure_ascii=False)))
    if info.failure is not None:
        rows.append(("failure", click.style(info.failure.value, fg="red")))
    if info.error_type:
        rows.append(("error_type", click.style(printable(info.error_type), fg="red")))
    if info.error:
        rows.append(("error", click.style(printable(info.error, lines=True), fg="red")))
    # one space at least: "progress meta" and header names are longer than the column
    lines = [f"{click.style(name.ljust(12), bold=True)} {value}" for name, value in rows]
    if info.traceback:
        lines += [click.style("traceback", bold=True), printable(info.traceback.rstrip(), lines=True)]
    return "\n".join(lines)
