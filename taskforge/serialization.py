"""The taskforge wire format: msgpack plus nine extension types.

This is the only module that knows how job arguments and results become bytes,
so that a producer, a worker and a non-Python tool reading Redis all agree.

Wire format
-----------
A payload is exactly one msgpack object (https://github.com/msgpack/msgpack/blob/master/spec.md)
with no trailing bytes. These Python types use native msgpack types::

    None   nil                  str    str (UTF-8)
    bool   true / false         bytes  bin
    int    int / uint family,   list   array
           -2**63 .. 2**64-1    dict   map, in insertion order; keys may be ANY
    float  float 64 (float 32          supported hashable value (int, nil, bin,
           is read as a float)         ext...), not only strings

Every other supported type is an ext object with one of these application
codes. "array [...]" means the ext data is itself one complete msgpack object,
encoded with these same rules (a tuple of datetimes nests ext inside ext)::

    code  Python type         ext data
    ----  ------------------  ------------------------------------------------------
       1  tuple               array of the items
       2  set                 array of the items (in iteration order, which means nothing)
       3  frozenset           array of the items
       4  datetime.datetime   array [year, month, day, hour, minute, second, microsecond,
                              fold, offset]: the local wall time; offset is nil when
                              naive, else the UTC offset in microseconds (east > 0)
       5  datetime.date       array [year, month, day]
       6  datetime.time       array [hour, minute, second, microsecond, fold, offset],
                              offset as for datetime
       7  datetime.timedelta  array [days, seconds, microseconds], normalised as Python
                              does: 0 <= seconds < 86400, 0 <= microseconds < 10**6 and
                              the sign in days (minus one microsecond is [-1, 86399, 999999])
       8  uuid.UUID           the 16 bytes of the UUID in RFC 4122 (big-endian) order
       9  decimal.Decimal     ASCII text in the General Decimal Arithmetic
                              to-scientific-string form: "-0", "1.50", "1E+999999",
                              "-Infinity", "NaN", "sNaN12" (the exponent letter may be e)

All fields of 4-7 are ints. Any other ext code, including msgpack's own
timestamp (-1), makes the payload corrupt. A job (``dumps_call``) is the array
``[args, kwargs]``: args an array (not a tuple ext), kwargs a map with str keys.
So ``dumps_call((1, "a"), {"to": "x@y.z"})`` is ``92 92 01 a1 61 81 a2 74 6f a5
78 40 79 2e 7a`` and ``dumps((1, 2))`` is ``c7 03 01 92 01 02``.

Deliberate losses: only the UTC offset of a tzinfo travels, so a ``ZoneInfo``
comes back as the fixed ``datetime.timezone`` offset it had at that instant,
without its name (``fold`` is kept). A tzinfo whose ``utcoffset()`` is None
(a ``time`` with a ``ZoneInfo``, say) makes the value naive by Python's own
definition, and it travels as naive. ``UUID.is_safe`` is not carried.

Values may nest at most ``MAX_DEPTH`` containers deep, and ``loads`` refuses
ext data nested deeper: decoding ext inside ext is recursive, and a crafted
payload would otherwise exhaust the C stack (a segfault, not an exception)
before Python's recursion limit noticed. Anything ``dumps`` accepts, ``loads``
reads back, on any thread with a stack of 256 KiB or more.
"""

from __future__ import annotations

import decimal
import enum
import re
import threading
import uuid
from collections.abc import Callable, Collection
from datetime import date, datetime, time, timedelta, timezone
from types import MappingProxyType
from typing import Any, Final

import msgpack
from msgpack import ExtType, Timestamp

from taskforge.errors import CorruptPayload, SerializationError

__all__ = [
    "EXT_DATE",
    "EXT_DATETIME",
    "EXT_DECIMAL",
    "EXT_FROZENSET",
    "EXT_SET",
    "EXT_TIME",
    "EXT_TIMEDELTA",
    "EXT_TUPLE",
    "EXT_UUID",
    "MAX_DEPTH",
    "dumps",
    "dumps_call",
    "dumps_result",
    "loads",
    "loads_call",
]

EXT_TUPLE: Final = 1
EXT_SET: Final = 2
EXT_FROZENSET: Final = 3
EXT_DATETIME: Final = 4
EXT_DATE: Final = 5
EXT_TIME: Final = 6
EXT_TIMEDELTA: Final = 7
EXT_UUID: Final = 8
EXT_DECIMAL: Final = 9

MAX_DEPTH: Final = 100

_SUPPORTED: Final = (
    "None, bool, int (64-bit), float, str, bytes, list, tuple, dict, set, frozenset, "
    "datetime, date, time, timedelta, uuid.UUID, decimal.Decimal"
)
_MICROSECOND: Final = timedelta(microseconds=1)
_CONTAINERS: Final = frozenset({list, tuple, dict, set, frozenset})
# Even with strict_types=True msgpack packs these itself, never asking `default`:
# bytearray and memoryview would come back as bytes, and ExtType / Timestamp
# objects would put raw ext codes of the caller's choosing into the payload.
_PACKED_WITHOUT_DEFAULT: Final = frozenset({bytearray, memoryview, ExtType, Timestamp})
_ENCODE_WALK_STOPS: Final = _CONTAINERS | _PACKED_WITHOUT_DEFAULT
_DECODE_WALK_STOPS: Final = _CONTAINERS | {Timestamp}
_STR_ONLY: Final = frozenset({str})
_EXACT_BASES: Final = (
    int, float, str, bytes, list, tuple, dict, set, frozenset,
    datetime, date, time, timedelta, uuid.UUID, decimal.Decimal,
)  # fmt: skip
_DECIMAL_TEXT: Final = re.compile(
    r"[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:e[+-]?\d+)?|inf(?:inity)?|s?nan\d*)", re.ASCII | re.IGNORECASE
)
_KEEP_CODEC_BELOW: Final = 1 << 20  # payload bytes; see _ThreadCodecs
_IDLE_CODECS_PER_THREAD: Final = 4
# One level for the payload, one per container, one for a leaf ext's own fields.
_MAX_DECODE_DEPTH: Final = MAX_DEPTH + 2
_MAX_PAYLOAD: Final = 2**31 - 1  # what a msgpack Unpacker can buffer; Redis stops at 512 MiB


class _ThreadCodecs(threading.local):
    """The current thread's idle msgpack Packers and Unpackers, and its decode depth.

    Not msgpack.packb: it builds a Packer and its buffer per call, ~4x the cost
    of packing a typical job. Not msgpack.unpackb: it keeps its 1024-level parse
    stack in a C local, 40-65 KiB of C stack per call, so decoding ext data inside
    ext data with it (a tuple in a tuple...) segfaults the process after ~250
    levels on an 8 MiB main thread and 4 on a 256 KiB thread; an Unpacker keeps
    that stack on the heap and costs ~1.2 KiB a level. Neither is thread-safe,
    hence one set per thread; neither is re-entrant (ext data is coded while the
    outer value is still being coded), hence pools: each use takes an idle one
    and returns it only after a success, so a half-used one is never reused.
    Their buffers never shrink, so one that handled a big payload is dropped.
    `depth` caps ext nesting on decode: nothing else would stop a crafted payload
    before the C stack, not Python's recursion limit, ran out.
    """

    def __init__(self) -> None:
        self.packers: list[msgpack.Packer] = []
        self.unpackers: list[msgpack.Unpacker] = []
        self.depth = [0]  # a cell: mutating it is ~2x faster than setting an attribute


_CODECS: Final = _ThreadCodecs()


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


def dumps(value: object) -> bytes:
    """Encode one value; SerializationError (naming the culprit type) if it cannot travel."""
    return _dumps_one(value, "the value")


def dumps_result(value: object) -> bytes:
    """Like dumps, but the message tells a worker log reader it was the return value."""
    return _dumps_one(value, "the task's return value")


def dumps_call(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bytes:
    """Encode a job's arguments; the error names the argument (positions are 0-based).

    The whole payload is packed in one go; only when that fails is each argument
    packed alone to find the one to blame, so the hot path pays nothing for it.
    """
    if (type(args) is not tuple and type(args) is not list) or type(kwargs) is not dict:
        raise SerializationError(
            f"a job needs its args as a tuple and its kwargs as a dict, got "
            f"{type(args).__name__} and {type(kwargs).__name__}; call dumps_call(tuple, dict)"
        )
    try:
        if not _is_flat_call(args, kwargs):
            _check_names(kwargs)
            _check_tree(args, kwargs.values())
        return _pack([list(args), kwargs])
    except SerializationError:
        raise
    except Exception as exc:
        raise _blame_argument(args, kwargs, exc) from _cause(exc)


def loads(data: bytes) -> object:
    """Decode one payload; CorruptPayload, and only that, for anything dumps cannot have made."""
    if type(data) is not bytes:
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise CorruptPayload(f"a payload is bytes, got {type(data).__name__}")
        data = bytes(data)  # so that the 0xff scan below sees bytes, not memoryview items
    try:
        value = _unpack(data)
        # Only a 0xff byte can introduce an ext -1, so most payloads skip the walk.
        if 0xFF in data:
            _refuse_timestamps(value)
    except CorruptPayload:
        raise
    except Exception as exc:  # msgpack raises ValueError, TypeError, StackError... on garbage
        raise CorruptPayload(f"not a taskforge payload: {_why_corrupt(exc)}") from exc
    return value


def loads_call(data: bytes) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Decode a job payload into (args, kwargs), refusing any other shape before a task sees it."""
    payload = loads(data)
    if type(payload) is not list or len(payload) != 2:
        raise CorruptPayload(f"a job payload is an array [args, kwargs], got {_shape(payload)}")
    args, kwargs = payload
    if type(args) is not list or type(kwargs) is not dict:
        raise CorruptPayload(f"a job payload is [args array, kwargs map], got [{_shape(args)}, {_shape(kwargs)}]")
    if not _STR_ONLY.issuperset(map(type, kwargs)):
        raise CorruptPayload("the kwargs map of a job payload has a key that is not a str")
    return tuple(args), kwargs


def _is_flat_call(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """True for the usual job (no container, str names), which then needs no walk.

    A loop: for a handful of arguments it beats two C-level passes, ~0.3 us vs ~1 us.
    """
    for value in args:
        if type(value) in _ENCODE_WALK_STOPS:
            return False
    for name, value in kwargs.items():
        if type(name) is not str or type(value) in _ENCODE_WALK_STOPS:
            return False
    return True


def _check_names(kwargs: dict[Any, Any]) -> None:
    for name in kwargs:
        if type(name) is not str:
            raise SerializationError(
                f"keyword argument names must be str, got {_short_repr(name)} of type "
                f"{_type_name(name)}; pass a dict with str keys as kwargs"
            )


def _dumps_one(value: object, subject: str) -> bytes:
    try:
        if type(value) in _ENCODE_WALK_STOPS:
            _check_tree((value,))
        return _pack(value)
    except Exception as exc:
        raise _serialization_error(exc, subject, value) from _cause(exc)


def _pack(value: object) -> bytes:
    idle = _CODECS.packers
    packer = idle.pop() if idle else msgpack.Packer(default=_default, strict_types=True)
    data = packer.pack(value)
    if len(data) < _KEEP_CODEC_BELOW and len(idle) < _IDLE_CODECS_PER_THREAD:
        idle.append(packer)
    return data


def _check_tree(*roots: Collection[object]) -> None:
    """Refuse what msgpack would pack without asking `_default`, and runaway nesting.

    Iterative, and a container holding no container and no suspect is cleared by
    one C-level pass over the types of its items, so flat data costs little.
    """
    stack = [(items, 0) for items in roots]
    while stack:
        items, depth = stack.pop()
        if _ENCODE_WALK_STOPS.isdisjoint(map(type, items)):
            continue
        for item in items:
            kind = type(item)
            if kind in _PACKED_WITHOUT_DEFAULT:
                raise _Unsupported("type", item)
            if kind in _CONTAINERS:
                if depth >= MAX_DEPTH:
                    raise _Unsupported("depth", item)
                stack.append((item, depth + 1))
                if kind is dict:
                    stack.append((item.values(), depth + 1))


def _default(value: Any) -> ExtType:
    encode = _ENCODERS.get(type(value))
    if encode is not None:
        return encode(value)
    if type(value) is int:  # msgpack hands over the ints that do not fit in 64 bits
        raise _Unsupported("range", value)
    raise _Unsupported("type", value)


def _offset(value: datetime | time) -> int | None:
    offset = value.utcoffset()
    return None if offset is None else offset // _MICROSECOND


def _encode_items(code: int) -> Callable[[Any], ExtType]:
    return lambda value: ExtType(code, _pack(list(value)))


_ENCODERS: Final[MappingProxyType[type, Callable[[Any], ExtType]]] = MappingProxyType({
    tuple: _encode_items(EXT_TUPLE),
    set: _encode_items(EXT_SET),
    frozenset: _encode_items(EXT_FROZENSET),
    datetime: lambda v: ExtType(EXT_DATETIME, _pack([
        v.year, v.month, v.day, v.hour, v.minute, v.second, v.microsecond, v.fold, _offset(v)
    ])),
    date: lambda v: ExtType(EXT_DATE, _pack([v.year, v.month, v.day])),
    time: lambda v: ExtType(EXT_TIME, _pack([
        v.hour, v.minute, v.second, v.microsecond, v.fold, _offset(v)
    ])),
    timedelta: lambda v: ExtType(EXT_TIMEDELTA, _pack([v.days, v.seconds, v.microseconds])),
    uuid.UUID: lambda v: ExtType(EXT_UUID, v.bytes),
    # str() follows the thread's decimal context only in the case of "E", which
    # decoding ignores.
    decimal.Decimal: lambda v: ExtType(EXT_DECIMAL, str(v).encode("ascii")),
})  # fmt: skip


def _unpack(data: bytes) -> object:
    codecs = _CODECS
    depth = codecs.depth
    if depth[0] >= _MAX_DECODE_DEPTH:
        raise CorruptPayload(f"ext values nested more than {MAX_DEPTH} deep")
    idle = codecs.unpackers
    unpacker = idle.pop() if idle else _new_unpacker()
    start = unpacker.tell()
    depth[0] += 1
    try:
        unpacker.feed(data)
        value = unpacker.unpack()
    finally:
        depth[0] -= 1
    if unpacker.tell() - start != len(data):
        raise msgpack.ExtraData(value, b"")
    if len(data) < _KEEP_CODEC_BELOW and len(idle) < _IDLE_CODECS_PER_THREAD:
        idle.append(unpacker)
    return value


def _new_unpacker() -> msgpack.Unpacker:
    return msgpack.Unpacker(
        None,
        ext_hook=_ext_hook,
        raw=False,
        strict_map_key=False,
        use_list=True,
        timestamp=0,
        max_buffer_size=_MAX_PAYLOAD,
        read_size=16 * 1024,
    )


def _ext_hook(code: int, data: bytes) -> object:
    entry = _DECODERS.get(code)
    if entry is None:
        raise CorruptPayload(f"unknown ext type code {code}")
    name, decode = entry
    try:
        return decode(data)
    except CorruptPayload:
        raise
    except Exception as exc:
        raise CorruptPayload(f"bad {name} (ext {code}): {_why_corrupt(exc)}") from exc


def _items(data: bytes) -> list[Any]:
    items = _unpack(data)
    if type(items) is not list:
        raise CorruptPayload(f"the data is {_shape(items)}, not an array")
    return items


def _fields(data: bytes, count: int, *, offset: bool = False) -> list[Any]:
    fields = _items(data)
    ints = fields[:-1] if offset else fields
    if len(fields) != count or not all(type(field) is int for field in ints):
        raise CorruptPayload(f"expected {count} int fields, got {_short_repr(fields)}")
    if offset and fields[-1] is not None and type(fields[-1]) is not int:
        raise CorruptPayload(f"the UTC offset is {_shape(fields[-1])}, not an int or nil")
    return fields


def _tz(offset: int | None) -> timezone | None:
    return None if offset is None else timezone(offset * _MICROSECOND)


def _decode_datetime(data: bytes) -> datetime:
    *wall, fold, offset = _fields(data, 9, offset=True)
    return datetime(*wall, tzinfo=_tz(offset), fold=fold)


def _decode_time(data: bytes) -> time:
    *wall, fold, offset = _fields(data, 6, offset=True)
    return time(*wall, tzinfo=_tz(offset), fold=fold)


def _decode_decimal(data: bytes) -> decimal.Decimal:
    text = data.decode("ascii")
    number = decimal.Decimal(text) if _DECIMAL_TEXT.fullmatch(text) else None
    # With InvalidOperation untrapped in the thread's context, a too-big exponent
    # quietly becomes NaN instead of raising.
    if number is None or (number.is_nan() and "n" not in text.lower()):
        raise CorruptPayload(f"{_short_repr(text)} is not a decimal number")
    return number


_DECODERS: Final[MappingProxyType[int, tuple[str, Callable[[bytes], object]]]] = MappingProxyType({
    EXT_TUPLE: ("tuple", lambda data: tuple(_items(data))),
    EXT_SET: ("set", lambda data: set(_items(data))),
    EXT_FROZENSET: ("frozenset", lambda data: frozenset(_items(data))),
    EXT_DATETIME: ("datetime", _decode_datetime),
    EXT_DATE: ("date", lambda data: date(*_fields(data, 3))),
    EXT_TIME: ("time", _decode_time),
    EXT_TIMEDELTA: ("timedelta", lambda data: timedelta(*_fields(data, 3))),
    EXT_UUID: ("UUID", lambda data: uuid.UUID(bytes=data)),
    EXT_DECIMAL: ("Decimal", _decode_decimal),
})  # fmt: skip


def _refuse_timestamps(value: object) -> None:
    """msgpack decodes ext -1 itself, whatever ext_hook says, so look for the result."""
    stack: list[Collection[object]] = [(value,)]
    while stack:
        items = stack.pop()
        if _DECODE_WALK_STOPS.isdisjoint(map(type, items)):
            continue
        for item in items:
            kind = type(item)
            if kind is Timestamp:
                raise CorruptPayload("ext -1 (a msgpack timestamp) is not in the taskforge format")
            if kind in _CONTAINERS:
                stack.append(item)
                if kind is dict:
                    stack.append(item.values())


def _blame_argument(args: tuple[Any, ...], kwargs: dict[str, Any], exc: Exception) -> SerializationError:
    for index, value in enumerate(args):
        problem = _problem_with(value)
        if problem is not None:
            return _serialization_error(problem, f"argument #{index} (positional, 0-based)", value)
    for name, value in kwargs.items():
        problem = _problem_with(value)
        if problem is not None:
            return _serialization_error(problem, f"argument {name!r} (keyword)", value)
    return _serialization_error(exc, "the job's arguments", (args, kwargs))


def _problem_with(value: object) -> Exception | None:
    try:
        _check_tree((value,))
        _pack(value)
    except Exception as exc:
        return exc
    return None


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
        return f"larger than {_MAX_PAYLOAD:,} bytes"
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
