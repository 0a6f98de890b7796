"""A task's options as a job keeps them (``TaskOptions``), and the parsers of the options given as text.

Kept apart from ``task.py`` (calling a task) so both stay small. The options
themselves (names, types, defaults, which check each gets) are declared once,
in ``decorator_options.py``, which builds a ``TaskOptions`` at decoration and
for ``with_options``, so a typo fails at import time rather than in a worker.
The bounds numbers are checked against are in ``bounds.py``; a single call's
own arguments (``apply_at``, ``apply_in``, ``job_id``) in ``call_arguments.py``.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from .bounds import MAX_COUNT, MAX_SECONDS, is_real_number
from .errors import ConfigurationError
from .job import Priority

UNIQUE_DEFAULT_TTL = 24 * 3600.0
_RATE = re.compile(r"^\s*(\d+)\s*/\s*(\d*)\s*(s|sec|second|m|min|minute|h|hour|d|day)s?\s*$", re.IGNORECASE)
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_rate_limit(value: str, option: str = "rate_limit") -> tuple[int, float]:
    """``"100/m"`` -> (100, 60.0): at most 100 starts in any 60-second window."""
    match = _RATE.match(value) if isinstance(value, str) else None
    period = float(match[2] or 1) * _UNIT_SECONDS[match[3][0].lower()] if match else 0.0
    if not match or not 1 <= int(match[1]) <= MAX_COUNT or not 0.001 <= period <= MAX_SECONDS:
        raise ConfigurationError(
            f"{option}={value!r}: use 'N/unit' with N from 1 to {MAX_COUNT}, a unit s, m, h or d, and a window "
            f"from 1 ms to {MAX_SECONDS:.0f} s (e.g. '100/m', '5/10s')"
        )
    return int(match[1]), period


def limits_text(rate_limit: tuple[int, float] | None, concurrency: int) -> str:
    """A rate limit and a concurrency as the scripts read them: "rate:period_ms:concurrency" ('' for none)."""
    if rate_limit is None and not concurrency:
        return ""
    rate, period = rate_limit or (0, 1.0)
    return f"{rate}:{int(period * 1000)}:{concurrency}"


@dataclass(frozen=True)
class TaskOptions:
    """What a job carries from its task's definition; built and checked by ``decorator_options.build``.

    Its fields are the declared options a job keeps, as kept (a rate limit
    parsed, ``unique`` folded into ``unique_for``), then what only
    ``with_options`` sets: ``job_id``, ``call_key``, ``retry_set_per_call``
    (``tests/test_option_list.py`` checks the two lists agree).
    """

    queue: str = "default"
    priority: Priority = Priority.NORMAL
    max_attempts: int = 3
    max_worker_losses: int = 2  # runs that may lose their worker (kill -9, a crashed child); they use no attempt
    timeout: float | None = None
    unique_for: float | None = None  # None: not unique
    unique_key: Callable[..., Any] | None = None
    rate_limit: tuple[int, float] | None = None
    concurrency: int = 0
    retry_on: tuple[type[BaseException], ...] | None = None  # None: every exception is retried
    dont_retry_on: tuple[type[BaseException], ...] = ()
    soft_timeout: float | None = None  # SoftTimeout raised inside the task; timeout still kills
    expires: float | datetime | None = None  # seconds after the enqueue, or an aware datetime
    job_id: str | None = None  # with_options only: the caller's id for the next job
    key: str | Callable[..., Any] | None = None  # a parameter's name, or a callable of the call's arguments
    call_key: str | None = None  # with_options(key=...): this key for the copy's jobs, as it is
    debounce: float | None = None  # seconds: a burst of calls per key runs once, with the last arguments
    debounce_max_wait: float | None = None  # seconds after the burst's first call at the latest (None: no cap)
    key_concurrency: int = 0  # at most this many jobs of the task per key run at once (0: no cap)
    key_rate_limit: tuple[int, float] | None = None  # at most N starts per key per window
    limits: tuple[str, ...] = ()  # the names of the app's shared limits (app.limit) its runs count against
    retry_set_per_call: bool = False  # with_options chose the retry filters: the job record carries them
    shared_limits: str = ""  # those limits as the scripts read them, "|name=rate:period_ms:concurrency" each

    @property
    def limit_text(self) -> str:
        """The limits as the enqueue script stores them ('' when unlimited): the task's own, then the
        shared ones it names (named_limits.py), each counted under its own name."""
        own = limits_text(self.rate_limit, self.concurrency)
        if not self.shared_limits:
            return own
        return (own or "0:1000:0") + self.shared_limits

    @property
    def key_limits(self) -> str:
        """The per-key limits as the enqueue script stores them ('' when none)."""
        return limits_text(self.key_rate_limit, self.key_concurrency)

    def record_fields(self) -> dict[str, str]:
        """The rarely set options a job record carries as plain fields: its budget of worker losses when not
        the default (the scripts read an absent one as 2), and the retry filters ``with_options`` chose."""
        fields = {} if self.max_worker_losses == 2 else {"max_worker_losses": str(self.max_worker_losses)}
        return {**fields, **self.retry_fields()}

    def retry_fields(self) -> dict[str, str]:
        """The retry filters as the job record stores them, when with_options chose them for a call."""
        if not self.retry_set_per_call:
            return {}
        return {
            "retry_on": "*" if self.retry_on is None else class_names(self.retry_on),
            "dont_retry_on": class_names(self.dont_retry_on),
        }


def validate_call_key(key: object) -> str:
    """``with_options(key=...)``: the key itself, a non-empty str."""
    if not isinstance(key, str) or not key:
        raise ConfigurationError(f"with_options(key={key!r}): use a non-empty str, the key of the jobs it sends")
    return key


def check_key_parameter(task: str, key: object, signature: inspect.Signature | None) -> None:
    """``key="name"`` must name a parameter of the task (unless it takes ``**kwargs``, or cannot be inspected)."""
    if not isinstance(key, str) or signature is None:
        return
    params = signature.parameters
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    if key not in params and not takes_any:
        raise ConfigurationError(
            f"{task}: key={key!r} is not a parameter of the task ({', '.join(params) or 'it takes none'}); "
            "name one, or pass a callable"
        )


def exception_classes(
    option: str, value: type[BaseException] | tuple[type[BaseException], ...]
) -> tuple[type[BaseException], ...]:
    """An exception class or a tuple of them, as ``except`` takes them."""
    classes = value if isinstance(value, tuple) else (value,)
    for cls in classes:
        if not (isinstance(cls, type) and issubclass(cls, BaseException)):
            raise ConfigurationError(f"{option}={value!r}: use an exception class or a tuple of them, as in except")
    return classes


def class_names(classes: tuple[type[BaseException], ...]) -> str:
    """``module.qualname`` of each class, comma-separated: a worker matches them against an
    exception's MRO, so it never imports anything a job names."""
    return ",".join(f"{cls.__module__}.{cls.__qualname__}" for cls in classes)


def parse_expires(value: object) -> float | datetime:
    """Seconds after the enqueue (a number or a timedelta), or an aware datetime."""
    if isinstance(value, datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise ConfigurationError(f"expires={value!r}: a datetime must be aware (give it a tzinfo)")
        return value
    seconds = value.total_seconds() if isinstance(value, timedelta) else value
    if not is_real_number(seconds) or not 0 < seconds <= MAX_SECONDS:  # type: ignore[operator]
        raise ConfigurationError(
            f"expires={value!r}: use seconds > 0 and at most {MAX_SECONDS:.0f} (~100 years), a timedelta, "
            "or an aware datetime"
        )
    return float(seconds)  # type: ignore[arg-type]
