"""The bounds every number a user gives is checked against, where it is given.

Every option and setting becomes a number in a job record, a Lua script
(doubles: exact integers to 2**53) or a Redis TTL in ms: beyond these, a value
is stored rounded (``max_attempts=2**63`` read back as a float) or overflows at
each send. The task options, the app's settings, the periodic schedules and a
call's own timing all check here, so each refuses the same values in the same
words, naming the option, the value and the range.
"""

from __future__ import annotations

import math
import numbers

from .errors import ConfigurationError

MAX_SECONDS = 100 * 365.25 * 86400  # ~100 years: any seconds option (timeout, retention, apply_in...)
MAX_COUNT = 2**31 - 1  # any count option (max_attempts, concurrency, a rate's N, max_size...)


def is_real_number(value: object) -> bool:
    """A finite int, float or other ``numbers.Real``, and not a bool: what a seconds option accepts.

    Takes ``object`` because the options are checked at run time, for callers
    whose code no type checker has seen (a ``"30"`` from a config file).
    """
    return not isinstance(value, bool) and isinstance(value, numbers.Real) and math.isfinite(value)


def checked_seconds(option: str, value: object, hint: str = "") -> float:
    """A number of seconds above 0 and at most MAX_SECONDS, as a float; ConfigurationError naming ``option``."""
    if not is_real_number(value) or not 0 < value <= MAX_SECONDS:  # type: ignore[operator]
        raise ConfigurationError(
            f"{option}={value!r}: use a number of seconds > 0 and at most {MAX_SECONDS:.0f} (~100 years){hint}"
        )
    return float(value)  # type: ignore[arg-type]


def checked_count(option: str, value: object, low: int = 1, hint: str = "") -> int:
    """A whole number from ``low`` to MAX_COUNT (not a bool); ConfigurationError naming ``option``."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= MAX_COUNT:
        raise ConfigurationError(f"{option}={value!r}: use a whole number from {low} to {MAX_COUNT}{hint}")
    return int(value)
