"""``taskforge queues forget APP QUEUE``: delete every key of an empty queue, and its name.

Exit codes: 0 forgotten, 2 the queue still holds jobs (nothing deleted) or a
bad argument, 1 Redis unreachable.
"""

from __future__ import annotations

import click

from ..errors import QueueNotEmpty
from ..forgetting import forget_queue
from .common import USAGE, cli_errors, fail, open_app

QUEUES_HELP = """Manage the queues this Redis remembers (the ones `taskforge status` lists)."""

FORGET_HELP = """Forget an empty queue: delete every key it has, and its name.

Refuses (exit 2, nothing deleted) while a job of the queue is pending,
scheduled, retrying, running or dead: purge it first (`taskforge purge APP
--queue QUEUE`, `taskforge dead APP purge --queue QUEUE`). Records of its
finished jobs go too. Sending to the queue again makes it anew.

\b
Example:
  taskforge queues forget myapp:app report-2027-01-05
"""


@click.group(help=QUEUES_HELP)
def queues() -> None:
    pass


@queues.command(help=FORGET_HELP)
@click.argument("app")
@click.argument("queue")
def forget(app: str, queue: str) -> None:
    the_app = open_app(app)
    with cli_errors():
        try:
            deleted = forget_queue(the_app, queue)
        except QueueNotEmpty as exc:
            fail(str(exc), USAGE)
    click.echo(f"queue {queue} forgotten: {deleted} keys deleted")
