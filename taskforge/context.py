"""``current_job()``: what a running task knows about its own job."""

from __future__ import annotations

import math
from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .errors import ConfigurationError, SerializationError, TaskforgeError
from .serialization import dumps

if TYPE_CHECKING:
    from .broker.queue import Claim
    from .broker.roles import ClaimsRole

PROGRESS_META_LIMIT = 64 * 1024  # bytes of msgpack: meta is for a few counters, not for results

_current: ContextVar[CurrentJob | None] = ContextVar("taskforge_current_job", default=None)


@dataclass(frozen=True)
class CurrentJob:
    """The job the calling task runs: its id, attempt (1 for the first run), headers and progress."""

    id: str
    attempt: int
    task: str
    queue: str
    _token: str
    _broker: ClaimsRole | None
    headers: Mapping[str, str] = field(default_factory=dict)  # set at enqueue by producer hooks

    def set_progress(self, fraction: float, message: str | None = None, meta: Any = None) -> None:
        """Record progress (0.0 to 1.0) for ``info()``, ``taskforge job`` and status.

        ``meta`` is any small msgpack-able value (``{"done": 3, "total": 10}``,
        what Celery's ``update_state(meta=...)`` carried), kept in
        ``JobInfo.progress_meta`` until the next call replaces it; it is
        checked here, so a value that cannot be stored raises
        ``SerializationError`` in the task, not somewhere later.

        Fenced like every write of a worker: a run whose claim was reclaimed
        cannot overwrite the progress of the run that replaced it.
        """
        if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not math.isfinite(fraction):
            raise ConfigurationError(f"set_progress({fraction!r}): use a number from 0.0 to 1.0")
        packed = b""
        if meta is not None:
            try:
                packed = dumps(meta)
            except SerializationError as exc:
                raise SerializationError(f"set_progress(meta=...): {exc}") from None
            if len(packed) > PROGRESS_META_LIMIT:
                raise SerializationError(
                    f"set_progress(meta=...): {len(packed):,} bytes of msgpack, over the {PROGRESS_META_LIMIT:,} "
                    "a progress meta may take; keep a few counters here and return the rest as the result"
                )
        if self._broker is not None:
            fraction = min(1.0, max(0.0, float(fraction)))
            self._broker.progress(self.queue, self.id, self._token, fraction, message, packed)

    if not TYPE_CHECKING:  # hidden from type checkers: a typo stays a static error

        def __getattr__(self, name: str) -> Any:
            """Only for names not found: a bound Celery task's ``self.retry``... name the taskforge way."""
            from . import celery_names

            raise celery_names.attribute_error("CurrentJob", name, celery_names.TASK)


def current_job() -> CurrentJob:
    """The job being run by the calling task; raises outside a task run by a worker."""
    job = _current.get()
    if job is None:
        raise TaskforgeError("current_job() is only available inside a task run by a worker (or app.drain())")
    return job


def enter(claim: Claim, broker: ClaimsRole | None) -> object:
    job = CurrentJob(claim.id, claim.attempts, claim.task, claim.queue, claim.token, broker, claim.headers or {})
    return _current.set(job)


def leave(token: object) -> None:
    _current.reset(token)  # type: ignore[arg-type]
