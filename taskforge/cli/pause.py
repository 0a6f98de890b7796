"""``taskforge pause`` and ``taskforge resume``: hold a whole queue's starts, and let them go.

Exit codes: 0 done (also when the queue already was so: the line says it),
2 bad arguments or an unknown APP, 1 Redis unreachable.
"""

from __future__ import annotations

import click

from .common import cli_errors, open_app

PAUSE_HELP = """Pause a queue: workers start none of its jobs until `taskforge resume`.

Jobs already running finish; new jobs are still accepted. The pause is kept
in Redis: it reaches every worker at its next claim (within a second) and
survives their restarts. `taskforge status` shows it.

\b
Example:
  taskforge pause myapp:app mail
"""

RESUME_HELP = """Resume a paused queue: its idle workers are woken and start its jobs at once.

\b
Example:
  taskforge resume myapp:app mail
"""


def flow_command(name: str, help_text: str, done: str, unchanged: str) -> click.Command:
    """``pause`` or ``resume``: the same arguments, one call of ``Broker.flow``, one line out."""

    @click.command(name=name, help=help_text)
    @click.argument("app")
    @click.argument("queue")
    def command(app: str, queue: str) -> None:
        the_app = open_app(app)
        with cli_errors():
            changed = getattr(the_app.broker.flow, name)(queue)
        click.echo(f"queue {queue} {done if changed else unchanged}")

    return command


pause = flow_command("pause", PAUSE_HELP, "paused", "was already paused")
resume = flow_command("resume", RESUME_HELP, "resumed", "was not paused")
