"""The ``taskforge`` command: a click group; each command is a thin layer over the library."""

from __future__ import annotations

import click

from .. import __version__
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
