"""A single call's own arguments, checked before anything is stored: when it runs, and its job id.

These belong to one call (``apply_at``, ``apply_in``, ``with_options(job_id=)``),
not to a task's definition, so they live apart from the task options; the
broker stores the time as ``due_ms`` or ``delay_ms`` in the job record.

``apply_async``'s arguments, as Celery spells them, are turned into the same
call here (``celery_call``): only code ported from Celery goes through it,
and every argument is checked before anything is stored, so a Celery option
taskforge lacks raises ``TypeError`` naming the taskforge way instead of
being silently ignored. Dramatiq's ``send_with_options`` goes the same way
(``dramatiq_call``): its ``delay`` is milliseconds, its other options are
``with_options``'s where taskforge has them.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from . import celery_names, other_names
from .bounds import MAX_SECONDS, is_real_number
from .errors import ConfigurationError
from .zones import AppZone

MAX_JOB_ID = 200


def due_ms(when: datetime, zone: AppZone, where: str = "apply_at()") -> int:
    """``apply_at``'s time as ms since the epoch, on the producer's clock; a naive datetime is in the app's zone."""
    if not isinstance(when, datetime):
        raise ConfigurationError(f"apply_at() needs a datetime, got {type(when).__name__}: {when!r}")
    when = zone.instant(when, where)
    try:
        return int(when.timestamp() * 1000)
    except (OverflowError, ValueError):
        raise ConfigurationError(f"apply_at({when!r}): that time cannot be represented; use an earlier one") from None


def delay_ms(delay: timedelta | float) -> int:
    """``apply_in``'s delay as ms, resolved later on Redis's clock; a negative one means now."""
    if isinstance(delay, timedelta):
        seconds = delay.total_seconds()
    elif is_real_number(delay):
        seconds = float(delay)
    else:
        raise ConfigurationError(f"apply_in() needs a timedelta or seconds, got {delay!r}")
    if seconds > MAX_SECONDS:
        raise ConfigurationError(f"apply_in({delay!r}): more than {MAX_SECONDS:.0f} s (~100 years) away")
    return max(0, int(seconds * 1000))


def validate_job_id(job_id: object) -> str:
    """A caller's job id: printable, 1 to MAX_JOB_ID characters, no whitespace (it becomes part of Redis keys)."""
    if isinstance(job_id, str) and len(job_id) > MAX_JOB_ID:
        raise ConfigurationError(f"job_id of {len(job_id)} characters: the limit is {MAX_JOB_ID}")
    if (
        not isinstance(job_id, str)
        or not job_id
        or len(job_id) > MAX_JOB_ID
        or not job_id.isprintable()
        or any(c.isspace() for c in job_id)
    ):
        raise ConfigurationError(
            f"job_id={job_id!r}: use a printable string of 1 to {MAX_JOB_ID} characters without spaces"
        )
    return job_id


def celery_call(
    task: str,
    args: object,
    kwargs: object,
    countdown: timedelta | float | None,
    eta: datetime | None,
    celery_options: Mapping[str, object],
    zone: AppZone,
) -> tuple[tuple[Any, ...], dict[str, Any], dict[str, int]]:
    """(args, kwargs, timing) for ``Task._enqueue_one``: ``countdown`` is ``apply_in``, ``eta`` ``apply_at``."""
    celery_names.reject_options(f"{task}.apply_async()", celery_options)
    call_args, call_kwargs = call_lists(f"{task}.apply_async", args, kwargs)
    if countdown is not None and eta is not None:
        raise ConfigurationError(
            f"{task}.apply_async(): countdown= and eta= together; give one (countdown is apply_in, eta is apply_at)"
        )
    timing: dict[str, int] = {}
    try:
        if countdown is not None:
            timing["delay_ms"] = delay_ms(countdown)
        elif eta is not None:
            timing["due_ms"] = due_ms(eta, zone, f"{task}.apply_async(eta=...)")
    except ConfigurationError as exc:  # its words name apply_in/apply_at: say which argument of this call
        given = "countdown" if countdown is not None else "eta"
        raise ConfigurationError(f"{task}.apply_async({given}=...): {exc}") from None
    return call_args, call_kwargs, timing


def call_lists(where: str, args: object, kwargs: object) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """``args`` and ``kwargs`` given as lists (Celery's and Dramatiq's spelling), checked."""
    if args is None:
        args = ()
    if not isinstance(args, (tuple, list)):
        raise TypeError(f"{where}(args={args!r}): args is a tuple or list of positional arguments")
    if kwargs is None:
        kwargs = {}
    if not isinstance(kwargs, Mapping):
        raise TypeError(f"{where}(kwargs={kwargs!r}): kwargs is a dict of keyword arguments")
    return tuple(args), dict(kwargs)


def dramatiq_call(
    task: str, args: object, kwargs: object, delay: object, options: Mapping[str, object], taken: frozenset[str]
) -> tuple[tuple[Any, ...], dict[str, Any], dict[str, int]]:
    """(args, kwargs, timing) of ``send_with_options``: ``delay`` in ms is ``apply_in``; the options not in
    ``taken`` (those ``with_options`` has) raise TypeError naming the taskforge way."""
    where = f"{task}.send_with_options"
    other_names.refuse_options(
        f"{where}()", {k: v for k, v in options.items() if k not in taken}, other_names.SEND_OPTIONS
    )
    call_args, call_kwargs = call_lists(where, args, kwargs)
    if delay is None:
        return call_args, call_kwargs, {}
    if isinstance(delay, timedelta):
        seconds = delay.total_seconds()
    elif is_real_number(delay):
        seconds = float(delay) / 1000  # type: ignore[arg-type]
    else:
        raise ConfigurationError(f"{where}(delay=...): milliseconds (an int) or a timedelta, got {delay!r}")
    try:
        return call_args, call_kwargs, {"delay_ms": delay_ms(seconds)}
    except ConfigurationError as exc:
        raise ConfigurationError(f"{where}(delay=...): {exc}") from None
