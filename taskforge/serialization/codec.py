"""The msgpack engine: per-thread packers and unpackers, and the nine extension types both ways."""

from __future__ import annotations

import decimal
import re
import threading
import uuid
from collections.abc import Callable, Collection
from datetime import date, datetime, time, timedelta, timezone
from types import MappingProxyType
from typing import Any, Final

import msgpack
from msgpack import ExtType, Timestamp

from ..errors import CorruptPayload
from . import format as fmt
from .messages import _shape, _short_repr, _Unsupported, _why_corrupt

_MICROSECOND: Final = timedelta(microseconds=1)
_DECIMAL_TEXT: Final = re.compile(
    r"[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:e[+-]?\d+)?|inf(?:inity)?|s?nan\d*)", re.ASCII | re.IGNORECASE
)
_KEEP_CODEC_BELOW: Final = 1 << 20  # payload bytes; see _ThreadCodecs
_IDLE_CODECS_PER_THREAD: Final = 4
# One level for the payload, one per container, one for a leaf ext's own fields.
_MAX_DECODE_DEPTH: Final = fmt.MAX_DEPTH + 2


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
    # Collection[Any]: the items are the caller's values. Only their exact types
    # are tested (a subclass is msgpack's to refuse), which no type checker
    # narrows on; an isinstance per container to satisfy one would cost ~8%
    # on container-heavy payloads.
    stack: list[tuple[Collection[Any], int]] = [(items, 0) for items in roots]
    while stack:
        items, depth = stack.pop()
        if fmt._ENCODE_WALK_STOPS.isdisjoint(map(type, items)):
            continue
        for item in items:
            kind = type(item)
            if kind in fmt._PACKED_WITHOUT_DEFAULT:
                raise _Unsupported("type", item)
            if kind in fmt._CONTAINERS:
                if depth >= fmt.MAX_DEPTH:
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
    tuple: _encode_items(fmt.EXT_TUPLE),
    set: _encode_items(fmt.EXT_SET),
    frozenset: _encode_items(fmt.EXT_FROZENSET),
    datetime: lambda v: ExtType(fmt.EXT_DATETIME, _pack([
        v.year, v.month, v.day, v.hour, v.minute, v.second, v.microsecond, v.fold, _offset(v)
    ])),
    date: lambda v: ExtType(fmt.EXT_DATE, _pack([v.year, v.month, v.day])),
    time: lambda v: ExtType(fmt.EXT_TIME, _pack([
        v.hour, v.minute, v.second, v.microsecond, v.fold, _offset(v)
    ])),
    timedelta: lambda v: ExtType(fmt.EXT_TIMEDELTA, _pack([v.days, v.seconds, v.microseconds])),
    uuid.UUID: lambda v: ExtType(fmt.EXT_UUID, v.bytes),
    # str() follows the thread's decimal context only in the case of "E", which
    # decoding ignores.
    decimal.Decimal: lambda v: ExtType(fmt.EXT_DECIMAL, str(v).encode("ascii")),
})  # fmt: skip


def _unpack(data: bytes) -> object:
    codecs = _CODECS
    depth = codecs.depth
    if depth[0] >= _MAX_DECODE_DEPTH:
        raise CorruptPayload(f"ext values nested more than {fmt.MAX_DEPTH} deep")
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
        max_buffer_size=fmt.MAX_PAYLOAD,
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
    year, month, day, hour, minute, second, microsecond, fold, offset = _fields(data, 9, offset=True)
    return datetime(year, month, day, hour, minute, second, microsecond, tzinfo=_tz(offset), fold=fold)


def _decode_time(data: bytes) -> time:
    hour, minute, second, microsecond, fold, offset = _fields(data, 6, offset=True)
    return time(hour, minute, second, microsecond, tzinfo=_tz(offset), fold=fold)


def _decode_decimal(data: bytes) -> decimal.Decimal:
    text = data.decode("ascii")
    number = decimal.Decimal(text) if _DECIMAL_TEXT.fullmatch(text) else None
    # With InvalidOperation untrapped in the thread's context, a too-big exponent
    # quietly becomes NaN instead of raising.
    if number is None or (number.is_nan() and "n" not in text.lower()):
        raise CorruptPayload(f"{_short_repr(text)} is not a decimal number")
    return number


_DECODERS: Final[MappingProxyType[int, tuple[str, Callable[[bytes], object]]]] = MappingProxyType({
    fmt.EXT_TUPLE: ("tuple", lambda data: tuple(_items(data))),
    fmt.EXT_SET: ("set", lambda data: set(_items(data))),
    fmt.EXT_FROZENSET: ("frozenset", lambda data: frozenset(_items(data))),
    fmt.EXT_DATETIME: ("datetime", _decode_datetime),
    fmt.EXT_DATE: ("date", lambda data: date(*_fields(data, 3))),
    fmt.EXT_TIME: ("time", _decode_time),
    fmt.EXT_TIMEDELTA: ("timedelta", lambda data: timedelta(*_fields(data, 3))),
    fmt.EXT_UUID: ("UUID", lambda data: uuid.UUID(bytes=data)),
    fmt.EXT_DECIMAL: ("Decimal", _decode_decimal),
})  # fmt: skip


def _refuse_timestamps(value: object) -> None:
    """msgpack decodes ext -1 itself, whatever ext_hook says, so look for the result."""
    stack: list[Collection[Any]] = [(value,)]  # Any: as in _check_tree
    while stack:
        items = stack.pop()
        if fmt._DECODE_WALK_STOPS.isdisjoint(map(type, items)):
            continue
        for item in items:
            kind = type(item)
            if kind is Timestamp:
                raise CorruptPayload("ext -1 (a msgpack timestamp) is not in the taskforge format")
            if kind in fmt._CONTAINERS:
                stack.append(item)
                if kind is dict:
                    stack.append(item.values())
