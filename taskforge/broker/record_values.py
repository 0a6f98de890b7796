"""How one raw value of a job's record reads, forgiving junk: the decoders ``record.py`` declares fields with.

A record may hold what taskforge never writes (edited by hand, written by
another tool, damaged): every decoder here turns such a value into "none"
or a documented default rather than raising, so inspecting a job never
fails on it and a worker dead-letters it with a reason instead of crashing.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from ..errors import CorruptPayload, error_type_of_kind
from ..job import FailureKind, JobState, Priority, ms_to_datetime
from ..serialization import loads

Raw = bytes | int | None  # a hash value as redis-py returns it (a claim row's numbers come back as int)


def blank(value: int | None) -> int | str:
    """An optional number as the enqueue array carries it: '' for none."""
    return "" if value is None else value


def encode_headers(headers: dict[str, str]) -> str:
    """The ``headers`` field: JSON, so that any tool reading the record can read it too."""
    return json.dumps(headers, separators=(",", ":"), ensure_ascii=False)


def decode_headers(raw: Raw) -> dict[str, str] | None:
    """A job's headers, or None for none; junk (written by something else) reads as none.

    Headers are metadata (trace context), never what a task computes with, so
    a damaged field costs the job its trace, not its run.
    """
    if not raw or not isinstance(raw, bytes):
        return None
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    if type(value) is not dict or not all(type(v) is str for v in value.values()):
        return None
    return value


def text(raw: Raw) -> str | None:
    return raw.decode(errors="replace") if isinstance(raw, bytes) and raw else None


def number(raw: Raw, default: int | None = None) -> int | None:
    try:
        return int(raw) if raw not in (None, b"") else default
    except (TypeError, ValueError):
        return default


def count(raw: Raw) -> int:
    """A count (attempts, max_attempts): 0 for none or junk."""
    return number(raw) or 0


def moment(raw: Raw) -> datetime | None:
    """A time field (ms since the epoch) as an aware datetime, or None."""
    return ms_to_datetime(number(raw))


def timeout(raw: Raw) -> float | None:
    """Seconds, or None: no field, junk, or a value no task option can produce (zero or less).

    A negative timeout written by something else would have the supervisor
    kill the child at once, whatever job it had moved on to.
    """
    ms = number(raw) or 0
    return ms / 1000 if ms > 0 else None


def fraction(raw: Raw) -> float | None:
    """A progress fraction; junk written by something else shows as no progress rather than raising."""
    try:
        value = float(raw or "nan")
    except ValueError:
        return None
    return value if 0.0 <= value <= 1.0 else None


def priority(raw: Raw) -> Priority:
    """Absent (a record that left the default out) or junk is normal priority, as the Lua's pending_score reads it."""
    try:
        return Priority(number(raw, Priority.NORMAL) or 0)
    except ValueError:
        return Priority.NORMAL


def state(raw: Raw) -> tuple[JobState, str | None]:
    """The state, and an error to show when the field holds what taskforge never writes."""
    value = text(raw)
    try:
        return JobState(value or "pending"), None
    except ValueError:
        return JobState.DEAD, f"unknown state {value!r} in the job record"


def failure(raw: Raw) -> FailureKind | None:
    return FailureKind.decode(text(raw))


def meta(raw: Raw) -> Any:
    """Progress meta; junk written by something else reads as none, like a junk fraction."""
    if not raw or not isinstance(raw, bytes):
        return None
    try:
        return loads(raw)
    except CorruptPayload:
        return None


def error_type(stored: str | None, kind: FailureKind | None) -> str | None:
    """The stored class path; for a record written before there was one, the class its kind names."""
    if stored or kind is None or kind in (FailureKind.EXCEPTION, FailureKind.RETRY):
        return stored
    return error_type_of_kind(kind.value)
