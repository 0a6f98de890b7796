"""A task's short name on the command line: ``add`` for ``myapp.add``, when one registered task has it.

Every command that takes a task name (``enqueue TASK_NAME``, ``jobs
--task``) passes it through ``full_task_name`` so they all read a name the
same way: a registered full name is itself; a name without a dot that is
the last part of exactly one registered name becomes that name; one that
is the last part of several is a usage error listing them, since guessing
would queue or touch the wrong task's jobs. Any other name is returned as
given: ``enqueue`` warns that it is unknown, and a ``jobs --task`` filter
may name a task that is gone but still has jobs.
"""

from __future__ import annotations

import click

from ..app import TaskForge
from ..errors import AppNotFound
from ..loader import import_included
from .common import USAGE, fail


def full_task_name(app: TaskForge, name: str) -> str:
    """``name`` as the registered task it stands for; exit 2 when it is the short name of several."""
    if name in app.tasks or "." in name:
        return name
    try:
        import_included(app)  # tasks defined in include= modules register only once imported
    except AppNotFound as exc:
        if exc.details:
            click.echo(exc.details.rstrip(), err=True)
        fail(str(exc), USAGE)
    if name in app.tasks:
        return name
    candidates = sorted(full for full in app.tasks if full.rpartition(".")[2] == name)
    if len(candidates) > 1:
        fail(
            f"task name {name!r} is the short name of {len(candidates)} tasks of {app.name!r}: "
            f"{', '.join(candidates)}; give the full name",
            USAGE,
        )
    return candidates[0] if candidates else name
