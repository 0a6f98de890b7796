"""``@app.periodic`` and ``@app.task`` stacked on one function: refused, naming the way to write it.

``@app.periodic`` registers the task itself and takes every ``@app.task``
option, so a function gets exactly one of them. Stacked, the outer
decorator receives a ``Task``, which has no ``__qualname__``; without this
check the refusal was ``@app.task``'s "pass name=", which sends the user
the wrong way.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from .errors import ConfigurationError
from .task import Task

if TYPE_CHECKING:
    from .periodic import Schedule


def refuse_stacked(decorator: str, fn: object, schedules: Sequence[Schedule], kind: str | None = None) -> None:
    """Raise when ``fn`` is a task already; ``kind`` is ``@app.periodic``'s ``cron`` or ``every`` when it asks."""
    if not isinstance(fn, Task):
        return
    if kind is None:
        kind = next((("cron" if s.cron is not None else "every") for s in schedules if s.task is fn), None)
    if kind is None:
        raise ConfigurationError(f"{decorator} on a task: {fn.name!r} is already a task; decorate the function once")
    raise ConfigurationError(
        f"{decorator} stacked with {'@app.task' if decorator == '@app.periodic' else '@app.periodic'} on "
        f"{fn.name!r}: @app.periodic registers the task itself and takes every @app.task option, so write "
        f"@app.periodic({kind}=..., queue=...) alone, without @app.task"
    )
