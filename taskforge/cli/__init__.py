"""The ``taskforge`` command: a click group; each command is a thin layer over the library."""

from __future__ import annotations

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
main.add_command(dead)
main.add_command(enqueue)
main.add_command(cancel)
main.add_command(abort)
main.add_command(purge)
main.add_command(broker)
main.add_command(demo)
main.add_command(dashboard)
