"""``taskforge jobs APP``: find jobs by what they are and did; retry, cancel or delete every one that matches."""

from __future__ import annotations

import json
from datetime import timedelta

import click

from .. import bulk
from ..app import TaskForge
from ..search import MAX_LIMIT, JobPage, Query, query
from ..since import parse_since
from ..status import now_utc
from .common import USAGE, cli_errors, fail, open_app
from .dead import first_line
from .job import STATE_COLOURS
from .purge import confirm_destructive, plural, stdin_is_terminal
from .table import cell, relative, render
from .task_names import full_task_name

JOBS_HELP = """Find jobs, newest first by creation; or retry, cancel or delete every job that matches.

\b
Example:
  taskforge jobs myapp:app --task myapp.send_email --state dead --since 1h
  taskforge jobs myapp:app --key customer-42 --json | jq '.jobs[].id'
  taskforge jobs myapp:app --match "timed out" --since 2d --retry --yes
  taskforge jobs myapp:app --queue mail --state succeeded --delete

--match finds text (any case) in the job's id, task name, key, arguments or
error; --task takes a task's full name, or its short name (after the last
dot) when only one task of the app has it, and any other name as given (a
task that is gone may still have jobs); --key matches a key exactly; --since takes 30s, 15m, 1h or 2d (created
since). A page stops at --limit jobs, or sooner when a rare text took a
while to look for; then it ends with the --cursor that goes on. --json
prints {"jobs": [objects with the fields of `taskforge job --json`],
"cursor": ... or null}.

--retry (dead jobs run again), --cancel (pending, scheduled and retrying
jobs end cancelled) and --delete (succeeded, dead and cancelled jobs are
removed) apply to every job that matches now, not one page; jobs in other
states are left alone. They ask first on a terminal unless --yes; with no
terminal and no --yes they change nothing and exit 2.
"""


def since_option(raw: str | None) -> timedelta | None:
    if raw is None:
        return None
    try:
        return parse_since(raw)
    except ValueError as exc:
        fail(f"--{exc}", USAGE)


@click.command(help=JOBS_HELP)
@click.argument("app")
@click.option("-q", "--queue", default=None, help="Only this queue (default: every queue).")
@click.option("--state", default=None, help="Only jobs in this state (pending, scheduled, running, retrying, ...).")
@click.option("--task", default=None, help="Only jobs of this task (its full name, or its short name if unique).")
@click.option("--key", default=None, help="Only jobs with this key (exactly).")
@click.option("--match", default=None, help="Only jobs with this text in id, task, key, arguments or error.")
@click.option("--since", "since_raw", default=None, help="Only jobs created since: 30s, 15m, 1h, 2d.")
@click.option("-n", "--limit", type=click.IntRange(1, MAX_LIMIT), default=20, show_default=True, help="Jobs per page.")
@click.option("--cursor", default=None, help="Go on from where the page with these filters ended.")
@click.option("--json", "as_json", is_flag=True, help='Print {"jobs": [...], "cursor": ...}.')
@click.option("--retry", is_flag=True, help="Run every matching dead job again.")
@click.option("--cancel", is_flag=True, help="Cancel every matching job not started yet.")
@click.option("--delete", is_flag=True, help="Delete every matching finished job.")
@click.option("-y", "--yes", is_flag=True, help="Do not ask before a bulk action.")
def jobs(
    app: str,
    queue: str | None,
    state: str | None,
    task: str | None,
    key: str | None,
    match: str | None,
    since_raw: str | None,
    limit: int,
    cursor: str | None,
    as_json: bool,
    retry: bool,
    cancel: bool,
    delete: bool,
    yes: bool,
) -> None:
    chosen = [name for name, on in (("retry", retry), ("cancel", cancel), ("delete", delete)) if on]
    if len(chosen) > 1:
        fail("give one of --retry, --cancel, --delete", USAGE)
    action = chosen[0] if chosen else None
    since = since_option(since_raw)
    if action and cursor:
        fail("--cursor pages a listing; a bulk action applies to every job that matches", USAGE)
    if action and not yes and not stdin_is_terminal():
        fail(f"refusing to {action} jobs without --yes (stdin is not a terminal to confirm on)", USAGE)
    the_app = open_app(app)
    if task is not None:
        task = full_task_name(the_app, task)
    with cli_errors():
        try:
            filters = query(the_app, queue=queue, state=state, task=task, key=key, match=match, since=since)
            if action:
                act(the_app, filters, action, yes, as_json)
                return
            page = the_app.find_jobs(
                queue=queue, state=state, task=task, key=key, match=match, since=since, limit=limit, cursor=cursor
            )
        except ValueError as exc:
            fail(str(exc), USAGE)
    if as_json:
        click.echo(json.dumps(page.to_dict(), indent=2))
    else:
        show(page)


def act(app: TaskForge, filters: Query, action: str, yes: bool, as_json: bool) -> None:
    if not yes:
        total = bulk.count(app, filters, action)
        if total == 0:
            click.echo(f"no jobs to {action}")
            return
        confirm_destructive(f"{action} {plural(total, 'job')} that match", yes)
    changed = bulk.apply(app, filters, action)
    if as_json:
        click.echo(json.dumps({"action": action, "changed": changed}))
    else:
        click.echo(f"{bulk.DONE[action]} {plural(changed, 'job')}")


def show(page: JobPage) -> None:
    if not page.jobs:
        click.echo("no jobs match" if page.cursor is None else "none found yet; go on with:")
    else:
        now = now_utc()
        rows = [
            [
                cell(i.id),
                cell(i.queue),
                cell(i.task),
                cell(i.state.value, fg=STATE_COLOURS.get(i.state)),
                cell(i.key or "-"),
                cell(relative(i.created_at, now)),
                cell(first_line(i.error), fg="red"),
            ]
            for i in page.jobs
        ]
        click.echo(render(["ID", "QUEUE", "TASK", "STATE", "KEY", "CREATED", "ERROR"], rows))
    if page.cursor is not None:
        click.echo(f"next page: --cursor {page.cursor}")
