"""``taskforge dead APP list | retry | purge``: the dead-letter set."""

from __future__ import annotations

import json

import click

from ..app import TaskForge
from ..broker.cleanup import RETRY_SLICE
from ..job import JobState
from ..job_json import job_to_json
from ..status import dead_jobs, now_utc
from ..workflows.resume import retry_dead
from .common import USAGE, cli_errors, fail, open_app
from .job import missing_is_usage
from .purge import chosen_queues, confirm_destructive, plural
from .table import cell, relative, render

DEAD_HELP = """Inspect, retry or delete dead jobs (failed on every attempt, or unrunnable).

\b
Example:
  taskforge dead myapp:app list --limit 5
  taskforge dead myapp:app retry 3f2a9c0d5e8b4a61a7c2e9f01b3d5c77
  taskforge dead myapp:app retry --all
  taskforge dead myapp:app purge --yes
"""

QUEUE_OPTION = click.option("-q", "--queue", default=None, help="Only this queue (default: every queue).")
ERROR_WIDTH = 60


@click.group(help=DEAD_HELP)
@click.argument("app")
@click.pass_context
def dead(ctx: click.Context, app: str) -> None:
    ctx.obj = app


@dead.command("list")
@click.option(
    "-n",
    "--limit",
    type=click.IntRange(min=1),
    default=20,
    show_default=True,
    help="Show at most this many, newest first.",
)
@QUEUE_OPTION
@click.option(
    "--json", "as_json", is_flag=True, help="Print a JSON array of job objects, as `taskforge job --json` prints one."
)
@click.pass_obj
def list_dead(spec: str, limit: int, queue: str | None, as_json: bool) -> None:
    """List the most recent dead jobs, newest first.

    \b
    Example:
      taskforge dead myapp:app list --limit 5 --json | jq '.[].error'
    """
    app = open_app(spec)
    with cli_errors():
        infos = dead_jobs(app, chosen_queues(app, queue), limit)
    if as_json:
        click.echo(json.dumps([job_to_json(info) for info in infos], indent=2))
        return
    if not infos:
        click.echo("no dead jobs")
        return
    now = now_utc()
    rows = [
        [
            cell(i.id),
            cell(i.queue),
            cell(i.task),
            cell(relative(i.finished_at, now)),
            cell(f"{i.attempts}/{i.max_attempts}"),
            cell(first_line(i.error), fg="red"),
        ]
        for i in infos
    ]
    click.echo(render(["ID", "QUEUE", "TASK", "DIED", "ATTEMPTS", "ERROR"], rows))


def first_line(error: str | None) -> str:
    line = (error or "").splitlines()[0] if error else "-"
    return line if len(line) <= ERROR_WIDTH else line[: ERROR_WIDTH - 3] + "..."


@dead.command("retry")
@click.argument("job_ids", nargs=-1, metavar="[JOB_ID]...")
@click.option("--all", "retry_all", is_flag=True, help="Retry every dead job.")
@QUEUE_OPTION
@click.pass_obj
def retry(spec: str, job_ids: tuple[str, ...], retry_all: bool, queue: str | None) -> None:
    """Put dead jobs back in line with a fresh set of attempts.

    \b
    Example:
      taskforge dead myapp:app retry 3f2a9c0d5e8b4a61a7c2e9f01b3d5c77
      taskforge dead myapp:app retry --all --queue mail
    """
    if bool(job_ids) == retry_all:
        fail("give either JOB_ID ... or --all", USAGE)
    app = open_app(spec)
    with cli_errors(), missing_is_usage():
        if retry_all:
            moved = retry_every(app, chosen_queues(app, queue))
        else:
            moved = retry_ids(app, job_ids)
    click.echo(f"retried {plural(moved, 'dead job')}")


def retry_ids(app: TaskForge, job_ids: tuple[str, ...]) -> int:
    """Check every id first, so a typo in the third id retries nothing."""
    by_queue: dict[str, list[str]] = {}
    for job_id in dict.fromkeys(job_ids):
        handle = app.job(job_id)
        state = handle.status()
        if state is not JobState.DEAD:
            fail(f"job {job_id} is {state.value}, not dead: only dead jobs can be retried", USAGE)
        by_queue.setdefault(handle.queue, []).append(job_id)
    return sum(len(retry_dead(app.broker, queue, ids)) for queue, ids in by_queue.items())


def retry_every(app: TaskForge, queues: list[str]) -> int:
    """Slice by slice, but no more than were dead at the start: jobs that die again wait for next time."""
    moved = 0
    for queue in queues:
        budget = app.broker.inspection.counts(queue)["dead"]
        while budget > 0:
            batch = retry_dead(app.broker, queue, app.broker.cleanup.oldest_dead(queue, min(budget, RETRY_SLICE)))
            if not batch:
                break
            moved += len(batch)
            budget -= len(batch)
    return moved


@dead.command("purge")
@QUEUE_OPTION
@click.option("-y", "--yes", is_flag=True, help="Do not ask for confirmation.")
@click.pass_obj
def purge_dead(spec: str, queue: str | None, yes: bool) -> None:
    """Delete dead jobs for good. Asks first on a terminal; needs --yes otherwise.

    \b
    Example:
      taskforge dead myapp:app purge --queue mail --yes
    """
    app = open_app(spec)
    with cli_errors():
        queues = chosen_queues(app, queue)
        counts = {name: app.broker.inspection.counts(name)["dead"] for name in queues}
        total = sum(counts.values())
        if total == 0:
            click.echo("no dead jobs to purge")
            return
        confirm_destructive(f"delete {plural(total, 'dead job')} for good", yes)
        deleted = sum(app.broker.cleanup.purge(name, "dead") for name in queues)
    click.echo(f"deleted {plural(deleted, 'dead job')}")
