"""``30s``, ``15m``, ``1h``, ``2d``: a duration as people type it, for how far back a search looks or how long to wait.

One parser for every place that takes the text (the dashboard's search form
and API, ``taskforge jobs --since``, ``taskforge enqueue --in``), so they
accept and refuse the same things. It raises ``ValueError`` and leaves the
wording of the refusal's context (an option, a form field) to its caller.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta

SINCE = re.compile(r"(\d{1,9})([smhd])")
UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}
FORMS = "30s, 15m, 1h or 2d"
EARLIEST = datetime(1, 1, 2)  # a day after datetime.min: room for any time zone


def parse_duration(text: str) -> timedelta:
    """``"15m"`` -> ``timedelta(minutes=15)``; a ``ValueError`` saying what to give for anything else or zero."""
    found = SINCE.fullmatch(text.strip())
    if not found or int(found.group(1)) == 0:
        raise ValueError(f"give a positive number and a unit, like {FORMS}")
    try:
        return timedelta(**{UNITS[found.group(2)]: int(found.group(1))})
    except OverflowError:
        return timedelta.max


def parse_since(text: str) -> timedelta:
    """``"1h"`` -> ``timedelta(hours=1)``; a ``ValueError`` for anything else, zero, or beyond the calendar."""
    try:
        delta = parse_duration(text)
    except ValueError as exc:
        raise ValueError(f"since {text!r}: {exc}") from None
    if delta >= datetime.now() - EARLIEST:  # a search subtracts it from now: refuse here what it could not
        raise ValueError(f"since {text!r}: that is further back than the calendar goes")
    return delta
