"""``current_job()``: what a running task knows about its own job."""

from __future__ import annotations

import math
from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .errors import ConfigurationError, TaskforgeError

if TYPE_CHECKING:
    from .broker.queue import Broker, Claim

_current: ContextVar[CurrentJob | None] = ContextVar("taskforge_current_job", default=None)


@dataclass(frozen=True)
class CurrentJob:
    """The job the calling task runs: its id, attempt (1 for the first run), headers and progress."""

    id: str
    attempt: int
    task: str
    queue: str
    _token: str
    _broker: Broker | None
    headers: Mapping[str, str] = field(default_factory=dict)  # set at enqueue by producer hooks

    def set_progress(self, fraction: float, message: str | None = None) -> None:
        """Record progress (0.0 to 1.0) for ``info()``, ``taskforge job`` and status.

        Fenced like every write of a worker: a run whose claim was reclaimed
        cannot overwrite the progress of the run that replaced it.
        """
        if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not math.isfinite(fraction):
            raise ConfigurationError(f"set_progress({fraction!r}): use a number from 0.0 to 1.0")
        if self._broker is not None:
            self._broker.progress(self.queue, self.id, self._token, min(1.0, max(0.0, float(fraction))), message)


def current_job() -> CurrentJob:
    """The job being run by the calling task; raises outside a task run by a worker."""
    job = _current.get()
    if job is None:
        raise TaskforgeError("current_job() is only available inside a task run by a worker (or app.drain())")
    return job


def enter(claim: Claim, broker: Broker | None) -> object:
    job = CurrentJob(claim.id, claim.attempts, claim.task, claim.queue, claim.token, broker, claim.headers or {})
    return _current.set(job)


def leave(token: object) -> None:
    _current.reset(token)  # type: ignore[arg-type]
