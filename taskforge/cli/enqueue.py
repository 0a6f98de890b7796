"""``taskforge enqueue APP TASK_NAME``: queue one job from the shell; prints its id."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import click

from ..job import Priority
from ..since import parse_duration
from ..task import Task
from .common import USAGE, cli_errors, fail, open_app, refuse_memory
from .task_names import full_task_name

ENQUEUE_HELP = """Queue a job for TASK_NAME and print its id.

TASK_NAME is the task's full name (module.function, as `taskforge status`
and the worker's log show it) or its short name (the part after the last
dot) when no other task of the app has it. Arguments are JSON: --args an
array, --kwargs an object. --in waits seconds or a duration (30s, 15m, 2h,
1d); --at takes an ISO 8601 time (no offset: the app's time zone,
TaskForge(timezone=...), else UTC). Without --priority the task's own priority
applies.

\b
Example:
  taskforge enqueue myapp:app myapp.send_email --kwargs '{"to": "a@b.c"}'
  taskforge enqueue myapp:app resize --args '[42, "big"]' --priority high --in 15m
  taskforge enqueue myapp:app myapp.report --at 2027-01-01T09:00:00+01:00
"""


def json_option(name: str, text: str | None, kind: type) -> Any:
    if text is None:
        return kind()
    try:
        value = json.loads(text)
    except ValueError as exc:
        fail(f"{name} is not valid JSON ({exc}): {text!r}", USAGE)
    if not isinstance(value, kind):
        wanted = "an array, e.g. '[1, \"a\"]'" if kind is list else 'an object, e.g. \'{"to": "a@b.c"}\''
        fail(f"{name} must be {wanted}; got {type(value).__name__}: {text!r}", USAGE)
    return value


def parse_at(text: str) -> datetime:
    try:
        # Python 3.10's fromisoformat does not read a trailing Z.
        when = datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith(("Z", "z")) else text)
    except ValueError:
        fail(f"--at {text!r} is not an ISO 8601 time; use e.g. 2027-01-01T09:00:00+01:00", USAGE)
    return when  # a naive one is read in the app's time zone, once the app is loaded


def parse_in(text: str) -> float:
    """Seconds (``30``, ``0.5``) or a duration as ``--since`` takes it (``30s``, ``15m``, ``2h``, ``1d``)."""
    try:
        seconds = float(text)
    except ValueError:
        try:
            return parse_duration(text).total_seconds()
        except ValueError:
            seconds = -1.0
    if not seconds >= 0 or seconds == float("inf"):
        fail(f"--in {text!r}: give seconds >= 0 or a duration like 30s, 15m, 2h or 1d", USAGE)
    return seconds


def parse_priority(text: str | None) -> Priority | None:
    if text is None:
        return None
    try:
        text = text.strip()
        return Priority.parse(int(text) if text.isdigit() else text)
    except ValueError as exc:
        fail(f"--priority: {exc}", USAGE)


@click.command(help=ENQUEUE_HELP)
@click.argument("app")
@click.argument("task_name")
@click.option("--args", "args_json", metavar="JSON", help="Positional arguments, a JSON array.")
@click.option("--kwargs", "kwargs_json", metavar="JSON", help="Keyword arguments, a JSON object.")
@click.option("-p", "--priority", metavar="P", help="low, normal, high or critical (or 0-3).")
@click.option("--in", "in_seconds", metavar="DELAY", help="Run after this long: seconds, or 30s, 15m, 2h, 1d.")
@click.option("--at", "at_time", metavar="ISO8601", help="Run at this time.")
def enqueue(
    app: str,
    task_name: str,
    args_json: str | None,
    kwargs_json: str | None,
    priority: str | None,
    in_seconds: str | None,
    at_time: str | None,
) -> None:
    if in_seconds is not None and at_time is not None:
        fail("give --in or --at, not both", USAGE)
    args = json_option("--args", args_json, list)
    kwargs = json_option("--kwargs", kwargs_json, dict)
    chosen = parse_priority(priority)
    delay = parse_in(in_seconds) if in_seconds is not None else None
    when = parse_at(at_time) if at_time is not None else None
    the_app = open_app(app)
    refuse_memory(the_app, app, "the job would vanish when this command exits")
    task_name = full_task_name(the_app, task_name)
    with cli_errors():
        task: Task[..., Any] = the_app.task_for(task_name)
        if chosen is not None:
            task = task.with_options(priority=chosen)
        if not task.registered:
            click.echo(
                f"warning: {the_app.name!r} has no task named {task_name!r}; queued by name "
                f"anyway (a worker that does not know it dead-letters the job)",
                err=True,
            )
        try:
            if when is not None:
                handle = task.apply_at(the_app.zone.instant(when, "taskforge enqueue --at"), *args, **kwargs)
            elif delay is not None:
                handle = task.apply_in(delay, *args, **kwargs)
            else:
                handle = task.delay(*args, **kwargs)
        except TypeError as exc:  # --args/--kwargs the task cannot take (Task.check_call): nothing queued
            fail(str(exc), USAGE)
    click.echo(handle.id)
