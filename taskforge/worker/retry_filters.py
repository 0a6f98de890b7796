"""A failed run's retry filters: whether its exception ends the job at once (``retry_on``, ``dont_retry_on``).

Apart from ``runner.py``: read only when a run fails, never on the hot path.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..broker.record import Claim
    from .runner import RunContext


def not_retried(context: RunContext, claim: Claim, error: BaseException) -> str | None:
    """Why ``error`` ends the job at once (its retry filters), or None to retry it as usual.

    The filters come from the worker's task definition, unless the producer
    chose them for this job (``with_options``): then the record carries them
    as class names, matched against the exception's MRO, so a worker never
    imports what a job names. Read only when a run fails, never on the hot path.
    """
    task = context.tasks.get(claim.task)
    retry_on, dont_retry_on = (task.options.retry_on, task.options.dont_retry_on) if task else (None, ())
    names = {f"{cls.__module__}.{cls.__qualname__}" for cls in type(error).__mro__}
    chosen = job_retry_fields(context, claim)
    if chosen is not None:
        only, never = chosen
        if only is not None and not names & only:
            return f"{type(error).__name__} is not retried"
        if names & never:
            return f"{type(error).__name__} is not retried"
        return None
    if retry_on is not None and not isinstance(error, retry_on):
        return f"{type(error).__name__} is not retried"
    if dont_retry_on and isinstance(error, dont_retry_on):
        return f"{type(error).__name__} is not retried"
    return None


def job_retry_fields(context: RunContext, claim: Claim) -> tuple[set[str] | None, set[str]] | None:
    """The retry filters stored with this job (``retry_on`` "*" = every exception), or None."""
    try:
        raw = context.broker.claims.job_fields(claim.queue, claim.id, ("retry_on", "dont_retry_on"))
    except Exception:  # Redis away: the task's own filters decide, and the outcome's recording will wait
        return None
    only, never = raw
    if only is None and never is None:
        return None
    return (None if only in (None, "*") else _names(only)), _names(never)


def _names(value: str | None) -> set[str]:
    return {name for name in (value or "").split(",") if name}
