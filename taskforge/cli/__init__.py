"""The ``taskforge`` command: a click group; each command is a thin layer over the library."""

# ruff: noqa: E402  (the imports follow the early signal handler below, on purpose)

from __future__ import annotations

import signal
import sys


def _stop_while_loading(_signum: int, _frame: object) -> None:
    """SIGTERM or Ctrl-C while ``taskforge worker`` still loads: nothing is claimed yet, so exit 0."""
    raise SystemExit(0)


# Before click and the commands are imported: a worker stopped this early exits 0,
# as a stopped worker does (not 143). The worker command, then its supervisor, take over.
if sys.argv[1:2] == ["worker"]:
    for _signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(_signum, _stop_while_loading)

import click

from .. import __version__

# Each command's module is imported when that command runs (or --help lists
# them). A worker's children re-import this module as their main module
# (multiprocessing's spawn), so an eager import here cost each child the
# dashboard, the inspection commands and the rest it never runs: about 50 ms
# of CPU in 300 (`python -c "import taskforge.cli; import taskforge.worker.child"`).
# Static imports, one per name: nothing is imported by a name built at run time.
COMMANDS = (
    "abort",
    "broker",
    "cancel",
    "dashboard",
    "dead",
    "demo",
    "enqueue",
    "job",
    "jobs",
    "pause",
    "purge",
    "queues",
    "resume",
    "status",
    "worker",
    "workflow",
)


def load(name: str) -> click.Command | None:  # noqa: C901  (one case per command, each a static import)
    """The command called ``name``, importing its module now; None for no such command."""
    match name:
        case "worker":
            from .worker import worker as command
        case "status":
            from .status import status as command
        case "job":
            from .job import job as command
        case "workflow":
            from .workflow import workflow as command
        case "jobs":
            from .jobs import jobs as command
        case "dead":
            from .dead import dead as command
        case "enqueue":
            from .enqueue import enqueue as command
        case "cancel":
            from .stop import cancel as command
        case "abort":
            from .stop import abort as command
        case "purge":
            from .purge import purge as command
        case "queues":
            from .queues import queues as command
        case "pause":
            from .pause import pause as command
        case "resume":
            from .pause import resume as command
        case "broker":
            from .broker import broker as command
        case "demo":
            from .demo import demo as command
        case "dashboard":
            from .dashboard import dashboard as command
        case _:
            return None
    return command


class LazyGroup(click.Group):
    """A group whose commands are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and (command := load(cmd_name)) is not None:
            self.add_command(command)
        return super().get_command(ctx, cmd_name)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="taskforge")
def main() -> None:
    """taskforge: a task queue for Python on Redis that never loses a job.

    \b
    Example:
      taskforge worker myapp:app -c 4
    """
