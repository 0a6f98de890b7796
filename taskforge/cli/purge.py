"""``taskforge purge APP``: delete the jobs still waiting to run (pending and scheduled)."""

from __future__ import annotations

import sys

import click

from ..app import TaskForge
from ..broker.keys import validate_queue_name
from ..status import all_queues
from .common import USAGE, cli_errors, fail, open_app

PURGE_HELP = """Delete queued jobs: pending, scheduled and retrying ones.

Running jobs are not touched; dead ones are purged with `taskforge dead APP
purge`. Without --queue: the app's queues and every other queue on this
Redis (the ones `taskforge status` shows). Asks for confirmation on a
terminal; when stdin is not a terminal, refuses (exit 2) unless --yes.

\b
Example:
  taskforge purge myapp:app --queue mail
  taskforge purge myapp:app --yes        # in a script
"""


def stdin_is_terminal() -> bool:
    return sys.stdin.isatty()


def confirm_destructive(what: str, yes: bool) -> None:
    """Go on only with --yes or a 'y' typed at a terminal; exit 2 when nobody can be asked."""
    if yes:
        return
    if not stdin_is_terminal():
        fail(f"refusing to {what} without --yes (stdin is not a terminal to confirm on)", USAGE)
    click.confirm(f"{what[0].upper()}{what[1:]}?", abort=True, err=True)


def chosen_queues(app: TaskForge, queue: str | None) -> list[str]:
    """--queue (checked), else every queue ``taskforge status`` shows."""
    return [validate_queue_name(queue)] if queue is not None else all_queues(app)


def describe(counts: dict[str, int]) -> str:
    parts = [f"{counts[which]} {which}" for which in ("pending", "scheduled") if counts[which]]
    return ", ".join(parts)


def plural(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


@click.command(help=PURGE_HELP)
@click.argument("app")
@click.option("-q", "--queue", default=None, help="Only this queue (default: every queue).")
@click.option("-y", "--yes", is_flag=True, help="Do not ask for confirmation.")
def purge(app: str, queue: str | None, yes: bool) -> None:
    the_app = open_app(app)
    with cli_errors():
        queues = chosen_queues(the_app, queue)
        waiting = {name: the_app.broker.inspection.counts(name) for name in queues}
        total = sum(c["pending"] + c["scheduled"] for c in waiting.values())
        if total == 0:
            click.echo(f"nothing to purge in {', '.join(queues)}")
            return
        detail = "; ".join(f"{name}: {describe(c)}" for name, c in waiting.items() if c["pending"] + c["scheduled"])
        confirm_destructive(f"delete {plural(total, 'queued job')} ({detail})", yes)
        for name in queues:
            pending = the_app.broker.cleanup.purge(name, "pending")
            scheduled = the_app.broker.cleanup.purge(name, "scheduled")
            if pending or scheduled:
                click.echo(f"{name}: deleted {pending} pending, {scheduled} scheduled")
