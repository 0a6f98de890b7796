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
from .broker import broker
from .dashboard import dashboard
from .dead import dead
from .demo import demo
from .enqueue import enqueue
from .job import job
from .purge import purge
from .status import status
from .stop import abort, cancel
from .worker import worker
from .workflow import workflow


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="taskforge")
def main() -> None:
    """taskforge: a task queue for Python on Redis that never loses a job.

    \b
    Example:
      taskforge worker myapp:app -c 4
    """


main.add_command(worker)
main.add_command(status)
main.add_command(job)
main.add_command(workflow)
main.add_command(dead)
main.add_command(enqueue)
main.add_command(cancel)
main.add_command(abort)
main.add_command(purge)
main.add_command(broker)
main.add_command(demo)
main.add_command(dashboard)
