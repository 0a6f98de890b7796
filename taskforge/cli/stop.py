"""``taskforge cancel`` and ``taskforge abort``: Celery's ``revoke`` for one job id.

Exit codes: 0 the job was stopped (or, for abort of a running job, its
worker was told to kill it); 1 nothing to stop (``cancel`` of a job already
running, or either command on a finished job), with one line saying why;
2 unknown job id, as for ``taskforge job``.
"""

from __future__ import annotations

from typing import Any

import click

from ..handle import JobHandle
from ..job import JobState
from ..printable import printable
from .common import FAILURE, cli_errors, fail, open_app
from .job import missing_is_usage

CANCEL_HELP = """Cancel a job that has not started: pending, scheduled or retrying.

The job ends cancelled and will never run. A job already running is left
alone (exit 1): stop it with `taskforge abort`. Exit codes: 0 cancelled,
1 too late (running or finished), 2 unknown job id.

\b
Example:
  taskforge cancel myapp:app 3f2a9c0d5e8b4a61a7c2e9f01b3d5c77
"""

ABORT_HELP = """Stop a job, running or not.

Not started yet: cancelled at once, like `taskforge cancel`. Running: its
worker kills the child running it at its next lease check (within about a
second) and records it cancelled. Exit codes: 0 cancelled or abort
requested, 1 already finished, 2 unknown job id.

\b
Example:
  taskforge abort myapp:app 3f2a9c0d5e8b4a61a7c2e9f01b3d5c77
"""


def describe(handle: JobHandle[Any]) -> str:
    return f"job {printable(handle.id)} ({printable(handle.info().task)}, queue {handle.queue})"


def too_late(handle: JobHandle[Any], state: JobState, advice: str) -> None:
    fail(f"job {handle.id} is already {state.value}: {advice}", FAILURE)


@click.command(help=CANCEL_HELP)
@click.argument("app")
@click.argument("job_id")
def cancel(app: str, job_id: str) -> None:
    the_app = open_app(app)
    with cli_errors(), missing_is_usage():
        handle = the_app.job(job_id)
        before = handle.status()
        if handle.cancel():
            click.echo(f"cancelled {describe(handle)}: it was {before.value} and will never run")
            return
        now = handle.status()
    if now is JobState.RUNNING:
        too_late(handle, now, "cancel stops only jobs that have not started; use `taskforge abort` to stop it")
    too_late(handle, now, "nothing to cancel")


@click.command(help=ABORT_HELP)
@click.argument("app")
@click.argument("job_id")
def abort(app: str, job_id: str) -> None:
    the_app = open_app(app)
    with cli_errors(), missing_is_usage():
        handle = the_app.job(job_id)
        before = handle.status()
        stopped = handle.abort()
        now = handle.status()
        if stopped and now is JobState.RUNNING:
            click.echo(
                f"abort requested for {describe(handle)}: its worker kills it within about a second "
                "and records it cancelled"
            )
            return
        if stopped:
            click.echo(f"cancelled {describe(handle)} before it started: it was {before.value}")
            return
    too_late(handle, now, "nothing to abort")
