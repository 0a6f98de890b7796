"""Error messages of the wire format: each names the value to blame and says what to pass instead."""

from __future__ import annotations

import decimal
import enum
import uuid
from datetime import date, datetime, time, timedelta
from typing import Final

import msgpack
from msgpack import ExtType, Timestamp

from ..errors import SerializationError
from .format import MAX_DEPTH, MAX_PAYLOAD

_SUPPORTED: Final = (
    "None, bool, int (64-bit), float, str, bytes, list, tuple, dict, set, frozenset, "
    "datetime, date, time, timedelta, uuid.UUID, decimal.Decimal"
)
_EXACT_BASES: Final = (
    int, float, str, bytes, list, tuple, dict, set, frozenset,
    datetime, date, time, timedelta, uuid.UUID, decimal.Decimal,
)  # fmt: skip


class _Unsupported(Exception):
    """Raised from inside msgpack; carries the culprit so the public error can name it."""

    def __init__(self, kind: str, culprit: object) -> None:
        super().__init__(kind)
        self.kind = kind  # "type", "range" or "depth"
        self.culprit = culprit

    def describe(self, subject: str, top: object) -> str:
        culprit, shown = self.culprit, _short_repr(self.culprit)
        if self.kind == "depth":
            return (
                f"{subject} nests containers more than {MAX_DEPTH} deep (or contains itself), "
                "which taskforge refuses so that a worker can always decode it; flatten it first"
            )
        if self.kind == "range":
            verb = "is" if culprit is top else "contains"
            return (
                f"{subject} {verb} the int {shown}, outside the 64-bit range msgpack can "
                "carry (-2**63 .. 2**64-1); pass it as a str or a decimal.Decimal instead"
            )
        head = "has type" if culprit is top else "contains a value of type"
        return (
            f"{subject} {head} {_type_name(culprit)} ({shown}), which taskforge cannot serialize"
            f"{_hint(culprit)}; pass one of: {_SUPPORTED}, or convert it first"
        )


def _serialization_error(exc: Exception, subject: str, top: object) -> SerializationError:
    if isinstance(exc, _Unsupported):
        return SerializationError(exc.describe(subject, top))
    if isinstance(exc, UnicodeEncodeError):
        return SerializationError(
            f"{subject} contains a str that is not valid UTF-8 ({exc.reason} at index "
            f"{exc.start} of {_short_repr(exc.object)}); fix it or pass bytes instead"
        )
    if isinstance(exc, RecursionError):
        return SerializationError(_Unsupported("depth", top).describe(subject, top))
    return SerializationError(
        f"{subject} cannot be serialized ({type(exc).__name__}: {exc}); pass one of: {_SUPPORTED}, or convert it first"
    )


def _cause(exc: Exception) -> Exception | None:
    return None if isinstance(exc, _Unsupported) else exc


def _why_corrupt(exc: Exception) -> str:
    if isinstance(exc, msgpack.ExtraData):
        return "extra bytes after the end of the payload"
    if isinstance(exc, (msgpack.StackError, RecursionError)):
        return "containers nested too deeply"
    if isinstance(exc, msgpack.FormatError):
        return "a byte that is not a msgpack type"
    if isinstance(exc, UnicodeDecodeError):
        return "a str that is not valid UTF-8"
    if isinstance(exc, msgpack.OutOfData):
        return "truncated"
    if isinstance(exc, msgpack.BufferFull):
        return f"larger than {MAX_PAYLOAD:,} bytes"
    return f"{type(exc).__name__}: {exc}"


def _type_name(value: object) -> str:
    kind = type(value)
    if kind.__module__ == "builtins":
        return kind.__qualname__
    return f"{kind.__module__}.{kind.__qualname__}"


def _shape(value: object) -> str:
    if type(value) is list:
        return f"a list of {len(value)}"
    return f"a value of type {_type_name(value)}"


def _short_repr(value: object) -> str:
    try:
        text = repr(value)
    except Exception:  # a user's __repr__ must not hide the real error
        return f"<{_type_name(value)} object>"
    return text if len(text) <= 60 else text[:57] + "..."


def _hint(value: object) -> str:
    if isinstance(value, enum.Enum):
        return " (an enum member: pass its .value)"
    if isinstance(value, (ExtType, Timestamp)):
        return " (a raw msgpack object: taskforge owns the ext codes)"
    if isinstance(value, (bytearray, memoryview)):
        return " (pass bytes(...) instead)"
    for base in _EXACT_BASES:
        if isinstance(value, base):
            return f" (a subclass of {base.__name__}: only the exact type is accepted)"
    return ""
