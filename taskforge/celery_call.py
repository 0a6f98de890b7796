"""``apply_async``'s arguments, as Celery spells them, checked and turned into a taskforge call.

Kept out of ``task.py``: only code ported from Celery goes through here, and
every argument is checked before anything is stored, so a Celery option
taskforge lacks raises ``TypeError`` naming the taskforge way instead of
being silently ignored.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from . import celery_names
from .call_arguments import delay_ms, due_ms
from .errors import ConfigurationError


def celery_call(
    task: str,
    args: object,
    kwargs: object,
    countdown: timedelta | float | None,
    eta: datetime | None,
    celery_options: Mapping[str, object],
) -> tuple[tuple[Any, ...], dict[str, Any], dict[str, int]]:
    """(args, kwargs, timing) for ``Task._enqueue_one``: ``countdown`` is ``apply_in``, ``eta`` ``apply_at``."""
    celery_names.reject_options(f"{task}.apply_async()", celery_options)
    if args is None:
        args = ()
    if not isinstance(args, (tuple, list)):
        raise TypeError(f"{task}.apply_async(args={args!r}): args is a tuple or list of positional arguments")
    if kwargs is None:
        kwargs = {}
    if not isinstance(kwargs, Mapping):
        raise TypeError(f"{task}.apply_async(kwargs={kwargs!r}): kwargs is a dict of keyword arguments")
    if countdown is not None and eta is not None:
        raise ConfigurationError(
            f"{task}.apply_async(): countdown= and eta= together; give one (countdown is apply_in, eta is apply_at)"
        )
    timing: dict[str, int] = {}
    try:
        if countdown is not None:
            timing["delay_ms"] = delay_ms(countdown)
        elif eta is not None:
            timing["due_ms"] = due_ms(eta)
    except ConfigurationError as exc:  # its words name apply_in/apply_at: say which argument of this call
        given = "countdown" if countdown is not None else "eta"
        raise ConfigurationError(f"{task}.apply_async({given}=...): {exc}") from None
    return tuple(args), dict(kwargs), timing
