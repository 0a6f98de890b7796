"""The wire format's contract: exact round trips, refusals that name the culprit,
and nothing but CorruptPayload out of bytes that are not a payload."""

from __future__ import annotations

import collections
import datetime as dt
import decimal
import enum
import math
import threading
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NamedTuple
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from msgpack import ExtType, Timestamp

from taskforge import serialization as wire
from taskforge.errors import CorruptPayload, SerializationError, TaskforgeError
from taskforge.serialization import dumps, dumps_call, dumps_result, loads, loads_call
from tests.conftest import skip_or_fail

UTC = dt.timezone.utc
NEPAL = dt.timezone(dt.timedelta(hours=5, minutes=45))
SUB_MINUTE = dt.timezone(-dt.timedelta(hours=3, minutes=25, seconds=7, microseconds=123))
MICROSECOND = dt.timedelta(microseconds=1)
SUPPORTED_TYPES = (
    type(None), bool, int, float, str, bytes, list, tuple, dict, set, frozenset,
    dt.datetime, dt.date, dt.time, dt.timedelta, uuid.UUID, decimal.Decimal,
)  # fmt: skip


def assert_same(expected: Any, actual: Any, path: str = "value") -> None:
    """Equal and of the very same type all the way down; nan equals nan, -0.0 is not 0.0."""
    assert type(actual) is type(expected), f"{path}: got {type(actual)}, want {type(expected)}"
    if isinstance(expected, float):
        if math.isnan(expected):
            assert math.isnan(actual), f"{path}: {actual!r} is not nan"
        else:
            assert actual == expected, f"{path}: {actual!r} != {expected!r}"
            assert math.copysign(1, actual) == math.copysign(1, expected), f"{path}: sign"
    elif isinstance(expected, decimal.Decimal):  # == would raise on sNaN and fail on NaN
        assert str(actual) == str(expected), f"{path}: {actual!r} != {expected!r}"
    elif isinstance(expected, (list, tuple)):
        assert len(actual) == len(expected), f"{path}: length"
        for index, (want, got) in enumerate(zip(expected, actual, strict=True)):
            assert_same(want, got, f"{path}[{index}]")
    elif isinstance(expected, dict):  # in order: msgpack maps keep insertion order
        assert len(actual) == len(expected), f"{path}: length"
        pairs = zip(expected.items(), actual.items(), strict=True)
        for index, ((want_key, want), (got_key, got)) in enumerate(pairs):
            assert_same(want_key, got_key, f"{path} key #{index}")
            assert_same(want, got, f"{path}[{want_key!r}]")
    elif isinstance(expected, (set, frozenset)):
        assert len(actual) == len(expected), f"{path}: length"
        for want in expected:
            matches = [got for got in actual if got == want]
            assert len(matches) == 1, f"{path}: no item equal to {want!r}"
            assert_same(want, matches[0], f"{path} item {want!r}")
    elif isinstance(expected, (dt.datetime, dt.time)):  # == ignores fold and compares instants
        assert actual.replace(tzinfo=None) == expected.replace(tzinfo=None), f"{path}: wall time"
        assert actual.fold == expected.fold, f"{path}: fold"
        assert actual.utcoffset() == expected.utcoffset(), f"{path}: UTC offset"
        if expected.tzinfo is None:
            assert actual.tzinfo is None, f"{path}: became aware"
        else:
            assert type(actual.tzinfo) is dt.timezone, f"{path}: tzinfo {actual.tzinfo!r}"
    else:
        assert actual == expected, f"{path}: {actual!r} != {expected!r}"


def assert_only_supported(value: Any) -> None:
    stack = [value]
    while stack:
        item = stack.pop()
        assert type(item) in SUPPORTED_TYPES, f"decoded a {type(item)}: {item!r}"
        if type(item) is dict:
            stack.extend(item)
            stack.extend(item.values())
        elif isinstance(item, (list, tuple, set, frozenset)):
            stack.extend(item)


def nested(depth: int, wrap: Callable[[Any], Any], leaf: Any = 0) -> Any:
    value = leaf
    for _ in range(depth):
        value = wrap(value)
    return value


def zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except ZoneInfoNotFoundError:
        skip_or_fail(f"no tz database entry for {name} (install tzdata)")


class Color(enum.IntEnum):
    RED = 1


class Shade(str, enum.Enum):
    DARK = "dark"


class Point(NamedTuple):
    x: int
    y: int


class Plain:
    pass


class MyDict(dict):  # type: ignore[type-arg]
    pass


class MyDatetime(dt.datetime):
    pass


class MyFloat(float):
    pass


def self_containing_list() -> list[Any]:
    value: list[Any] = [1]
    value.append(value)
    return value


# ---------------------------------------------------------------- exact round trips

ROUND_TRIPS: dict[str, Any] = {
    "None": None,
    "True": True,
    "False": False,
    "zero": 0,
    "small ints": [1, -1, 127, 128, -32, -33, 255, 256, 65535, 65536, 2**31, -(2**31) - 1],
    "int64 max": 2**63 - 1,
    "int64 min": -(2**63),
    "uint64 range": 2**63,
    "uint64 max": 2**64 - 1,
    "floats": [0.0, 1.5, -2.25, 1e308, 5e-324, 0.1],
    "minus zero": -0.0,
    "inf": math.inf,
    "minus inf": -math.inf,
    "nan": math.nan,
    "empty str": "",
    "unicode str": "héllo ☃ 🎉 \x00",
    "long str": "x" * 70_000,
    "empty bytes": b"",
    "all bytes": bytes(range(256)),
    "lists": [[], [1, "a", None], [[[]]]],
    "empty tuple": (),
    "one tuple": (1,),
    "nested tuples and lists": ((1, 2), [3, (4,)], ([],)),
    "empty dict": {},
    "dict order kept": {"b": 1, "a": 2, "c": 3},
    "dict keys of many types": {
        1: "int",
        2.5: "float",
        None: "None",
        b"raw": "bytes",
        "s": "str",
        (1, "t"): "tuple",
        frozenset({1, 2}): "frozenset",
        dt.datetime(2024, 1, 2, 3, 4): "datetime",
        dt.date(2024, 1, 2): "date",
        dt.time(12, 0, tzinfo=NEPAL): "time",
        dt.timedelta(days=1): "timedelta",
        uuid.UUID(int=1): "UUID",
        decimal.Decimal("1.5"): "Decimal",
    },
    "bool keys": {True: "t", False: "f"},
    "int keys at the edges": {0: [], -(2**63): {}, 2**64 - 1: ()},
    "empty set": set(),
    "set of mixed items": {1, "a", b"b", None, (2, 3), frozenset({4}), 1.5, dt.date(2020, 1, 1)},
    "empty frozenset": frozenset(),
    "frozenset of frozensets": frozenset({(1,), frozenset({2}), frozenset()}),
    "set of frozensets": {frozenset({1}), frozenset({frozenset()})},
    "naive datetime": dt.datetime(2024, 1, 2, 3, 4, 5, 678901),
    "naive datetime fold 1": dt.datetime(2024, 11, 3, 1, 30, fold=1),
    "utc datetime": dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC),
    "+05:45 datetime": dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=NEPAL),
    "sub-minute offset datetime": dt.datetime(2024, 1, 2, tzinfo=SUB_MINUTE),
    "one microsecond offset": dt.datetime(2024, 1, 2, tzinfo=dt.timezone(MICROSECOND)),
    "-23:59 offset": dt.datetime(2024, 1, 2, tzinfo=dt.timezone(dt.timedelta(minutes=-1439))),
    "aware datetime fold 1": dt.datetime(2024, 1, 2, fold=1, tzinfo=NEPAL),
    "datetime min": dt.datetime.min,
    "datetime max": dt.datetime.max,
    "aware datetime max": dt.datetime.max.replace(tzinfo=NEPAL),
    "date": dt.date(2024, 2, 29),
    "date min and max": [dt.date.min, dt.date.max],
    "date and datetime side by side": (dt.date(2020, 1, 1), dt.datetime(2020, 1, 1)),
    "midnight": dt.time(),
    "time max": dt.time(23, 59, 59, 999999),
    "aware time": dt.time(1, 2, 3, 4, tzinfo=NEPAL),
    "sub-minute offset time": dt.time(1, 2, tzinfo=SUB_MINUTE),
    "time fold 1": dt.time(3, fold=1),
    "zero timedelta": dt.timedelta(),
    "negative timedeltas": [dt.timedelta(days=-1), dt.timedelta(microseconds=-1)],
    "timedelta min and max": [dt.timedelta.min, dt.timedelta.max],
    "timedelta": dt.timedelta(days=3, hours=4, microseconds=5),
    "UUIDs": [uuid.UUID(int=0), uuid.UUID(int=2**128 - 1), uuid.uuid4()],
    "Decimal zeros": [decimal.Decimal("0"), decimal.Decimal("-0"), decimal.Decimal("0E-30")],
    "Decimal keeps its exponent": decimal.Decimal("1.50"),
    "Decimal many digits": decimal.Decimal("123456789012345678901234567890.123456789"),
    "Decimal huge exponents": [decimal.Decimal("1E+999999999999999999"), decimal.Decimal("-7E-99")],
    "Decimal specials": [decimal.Decimal(text) for text in ("NaN", "-NaN", "sNaN", "NaN123", "Infinity", "-Infinity")],
    "everything nested": {
        "user": {"id": uuid.UUID(int=7), "tags": {"a", "b"}, "at": (dt.datetime(2024, 1, 2), None)},
        "rows": [[1, 2.5, None], (decimal.Decimal("1.1"), b"x", frozenset({dt.timedelta(1)}))],
        (1, (2, frozenset({3}))): [{"deep": [{"deeper": ({4: {5: (6, math.nan)}},)}]}],
    },
}


@pytest.mark.parametrize("value", ROUND_TRIPS.values(), ids=ROUND_TRIPS.keys())
def test_round_trips_exactly(value: Any) -> None:
    assert_same(value, loads(dumps(value)))
    assert_same(value, loads(dumps_result(value)))


@pytest.mark.parametrize("value", ROUND_TRIPS.values(), ids=ROUND_TRIPS.keys())
def test_round_trips_exactly_as_job_arguments(value: Any) -> None:
    args, kwargs = loads_call(dumps_call(("first", value), {"kw": value}))
    assert_same(("first", value), args)
    assert_same({"kw": value}, kwargs)


def test_a_list_of_args_comes_back_as_a_tuple() -> None:
    assert loads_call(dumps_call([1, 2], {})) == ((1, 2), {})


@pytest.mark.parametrize(("fold", "hours"), [(0, -4), (1, -5)])
def test_a_zoneinfo_becomes_the_fixed_offset_it_had(fold: int, hours: int) -> None:
    when = dt.datetime(2024, 11, 3, 1, 30, fold=fold, tzinfo=zone("America/New_York"))
    out = loads(dumps(when))
    assert type(out) is dt.datetime and type(out.tzinfo) is dt.timezone
    assert out.utcoffset() == dt.timedelta(hours=hours)
    assert out.replace(tzinfo=None) == when.replace(tzinfo=None) and out.fold == fold
    assert out.timestamp() == when.timestamp()


def test_a_time_whose_tzinfo_gives_no_offset_travels_naive() -> None:
    out = loads(dumps(dt.time(9, 30, tzinfo=zone("Europe/Paris"))))
    assert out == dt.time(9, 30) and out.tzinfo is None


def test_a_float32_from_another_producer_reads_as_a_float() -> None:
    assert_same(1.5, loads(b"\xca\x3f\xc0\x00\x00"))


def test_decimals_do_not_depend_on_the_threads_decimal_context() -> None:
    with decimal.localcontext() as ctx:
        ctx.prec, ctx.capitals = 3, 0  # str() now writes "e"; decoding must still accept it
        ctx.traps[decimal.InvalidOperation] = False
        value = decimal.Decimal("-1.23456789E+20")
        assert_same(value, loads(dumps(value)))
        with pytest.raises(CorruptPayload):  # would quietly be NaN without the check
            loads(msgpack.packb(ExtType(wire.EXT_DECIMAL, b"1E+9999999999999999999999")))


# ---------------------------------------------------------------- the documented wire format


def ext(code: int, data: Any) -> bytes:
    """An ext object built by hand: msgpack.ExtType refuses the negative codes."""
    data = data if type(data) is bytes else msgpack.packb(data)
    size = len(data)
    head = b"\xc7" + bytes([size]) if size < 256 else b"\xc8" + size.to_bytes(2, "big")
    return head + code.to_bytes(1, "big", signed=True) + data


def packed_ext(code: int, data: Any) -> bytes:
    """The canonical encoding (fixext when the size allows), as msgpack writes it."""
    return msgpack.packb(ExtType(code, data if type(data) is bytes else msgpack.packb(data)))


WIRE: dict[str, tuple[Any, bytes]] = {
    "job": (None, bytes.fromhex("92 92 01 a1 61 81 a2 74 6f a5 78 40 79 2e 7a")),
    "tuple": ((1, 2), bytes.fromhex("c7 03 01 92 01 02")),
    "set": ({"a"}, packed_ext(wire.EXT_SET, ["a"])),
    "frozenset": (frozenset(), packed_ext(wire.EXT_FROZENSET, [])),
    "naive datetime": (
        dt.datetime(2024, 1, 2, 3, 4, 5, 6),
        packed_ext(wire.EXT_DATETIME, [2024, 1, 2, 3, 4, 5, 6, 0, None]),
    ),
    "aware datetime": (
        dt.datetime(2024, 1, 2, fold=1, tzinfo=NEPAL),
        packed_ext(wire.EXT_DATETIME, [2024, 1, 2, 0, 0, 0, 0, 1, 20_700_000_000]),
    ),
    "date": (dt.date(2024, 1, 2), bytes.fromhex("c7 06 05 93 cd 07 e8 01 02")),
    "time": (
        dt.time(1, 2, 3, 4, tzinfo=SUB_MINUTE),
        packed_ext(wire.EXT_TIME, [1, 2, 3, 4, 0, -12_307_000_123]),
    ),
    "timedelta": (dt.timedelta(microseconds=-1), packed_ext(wire.EXT_TIMEDELTA, [-1, 86399, 999999])),
    "UUID": (uuid.UUID(int=1), packed_ext(wire.EXT_UUID, bytes(15) + b"\x01")),
    "Decimal": (decimal.Decimal("-1.50E+3"), packed_ext(wire.EXT_DECIMAL, b"-1.50E+3")),
    "tuple nesting": (((1,),), packed_ext(wire.EXT_TUPLE, [ExtType(wire.EXT_TUPLE, msgpack.packb([1]))])),
    "dict with an int key": ({1: None}, b"\x81\x01\xc0"),
}


@pytest.mark.parametrize(("value", "wire"), WIRE.values(), ids=WIRE.keys())
def test_the_bytes_are_the_documented_ones(value: Any, wire: bytes) -> None:
    if value is None:
        assert dumps_call((1, "a"), {"to": "x@y.z"}) == wire
    else:
        assert dumps(value) == wire


def test_a_lowercase_exponent_is_read() -> None:
    assert_same(decimal.Decimal("1.5E+3"), loads(ext(wire.EXT_DECIMAL, b"1.5e+3")))


# ---------------------------------------------------------------- properties

INT64 = st.integers(min_value=-(2**63), max_value=2**64 - 1)
OFFSETS = st.timedeltas(min_value=dt.timedelta(hours=-24) + MICROSECOND, max_value=dt.timedelta(hours=24) - MICROSECOND)
FIXED_TZ = st.none() | st.just(UTC) | st.builds(dt.timezone, OFFSETS)
FOLDS = st.sampled_from([0, 1])


def scalars(*, hashable: bool) -> st.SearchStrategy[Any]:
    # Set items and dict keys are matched by ==, which NaN defeats and which a
    # ZoneInfo datetime in a fold answers False across zones (PEP 495).
    zones = FIXED_TZ if hashable else FIXED_TZ | st.timezones()
    return st.one_of(
        st.none(),
        st.booleans(),
        INT64,
        st.floats(allow_nan=not hashable),
        st.text(),
        st.binary(),
        st.builds(lambda d, fold: d.replace(fold=fold), st.datetimes(timezones=zones), FOLDS),
        st.dates(),
        st.builds(lambda t, fold: t.replace(fold=fold), st.times(timezones=FIXED_TZ), FOLDS),
        st.timedeltas(),
        st.uuids(),
        st.decimals(allow_nan=not hashable),
    )


HASHABLES = st.recursive(
    scalars(hashable=True),
    lambda inner: st.lists(inner, max_size=3).map(tuple) | st.frozensets(inner, max_size=3),
    max_leaves=6,
)
VALUES = st.recursive(
    scalars(hashable=False),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.lists(inner, max_size=4).map(tuple),
        st.dictionaries(HASHABLES, inner, max_size=4),
        st.sets(HASHABLES, max_size=4),
        st.frozensets(HASHABLES, max_size=4),
    ),
    max_leaves=20,
)


@settings(max_examples=300)
@given(VALUES)
def test_any_supported_value_round_trips_exactly(value: Any) -> None:
    assert_same(value, loads(dumps(value)))


@given(st.lists(VALUES, max_size=4), st.dictionaries(st.text(), VALUES, max_size=4))
def test_any_call_round_trips_exactly(args: list[Any], kwargs: dict[str, Any]) -> None:
    out_args, out_kwargs = loads_call(dumps_call(tuple(args), kwargs))
    assert_same(tuple(args), out_args)
    assert_same(kwargs, out_kwargs)


@settings(max_examples=500)
@given(st.binary())
def test_random_bytes_raise_only_corrupt_payload(data: bytes) -> None:
    try:
        value = loads(data)
    except CorruptPayload:
        return
    assert_only_supported(value)


@settings(max_examples=300)
@given(st.binary())
def test_random_bytes_as_a_job_raise_only_corrupt_payload(data: bytes) -> None:
    try:
        args, kwargs = loads_call(data)
    except CorruptPayload:
        return
    assert type(args) is tuple and type(kwargs) is dict and all(type(k) is str for k in kwargs)
    assert_only_supported([args, kwargs])


wire.EXT_FIELDS = st.lists(
    st.one_of(st.none(), st.booleans(), st.integers(-2, 2100), INT64, st.floats(), st.text(max_size=3)),
    max_size=10,
)


@settings(max_examples=500)
@given(
    st.integers(min_value=-128, max_value=127) | st.sampled_from(range(wire.EXT_TUPLE, wire.EXT_DECIMAL + 1)),
    st.one_of(st.binary(max_size=24), wire.EXT_FIELDS.map(msgpack.packb), VALUES.map(dumps)),
)
def test_any_ext_code_and_data_raise_only_corrupt_payload(code: int, data: bytes) -> None:
    try:
        value = loads(b"\x91" + ext(code, data))
    except CorruptPayload:
        return
    assert_only_supported(value)


@given(VALUES, st.data())
def test_damaged_payloads_raise_only_corrupt_payload(value: Any, data: st.DataObject) -> None:
    payload = dumps(value)
    cut = data.draw(st.integers(min_value=0, max_value=len(payload) - 1))
    with pytest.raises(CorruptPayload):  # msgpack is prefix-free: a prefix is never complete
        loads(payload[:cut])
    with pytest.raises(CorruptPayload):
        loads(payload + data.draw(st.binary(min_size=1, max_size=3)))
    damaged = bytearray(payload)
    damaged[cut] ^= data.draw(st.integers(min_value=1, max_value=255))
    try:
        out = loads(bytes(damaged))
    except CorruptPayload:
        return
    assert_only_supported(out)


# ---------------------------------------------------------------- corrupt input


def deep_tuple_payload(depth: int) -> bytes:
    data = msgpack.packb(1)
    for _ in range(depth):
        data = msgpack.packb(ExtType(wire.EXT_TUPLE, b"\x91" + data))
    return data


def datetime_ext(*fields: Any) -> bytes:
    return ext(wire.EXT_DATETIME, list(fields))


CORRUPT: dict[str, bytes] = {
    "empty": b"",
    "reserved byte 0xc1": b"\xc1",
    "truncated array": b"\x92\x01",
    "truncated str32 header": b"\xdb\xff\xff\xff\xff",
    "a trailing byte": dumps(1) + b"\x00",
    "two payloads": dumps([1]) + dumps([2]),
    "invalid UTF-8": b"\xa2\xff\xfe",
    "unknown ext code": ext(42, b""),
    "ext code 0": ext(0, []),
    "negative ext code": ext(-5, b"x"),
    "msgpack timestamp": msgpack.packb(Timestamp(0, 0)),
    "timestamp deep in a list": msgpack.packb([1, [{"k": Timestamp(5, 0)}]]),
    "timestamp in a tuple": ext(wire.EXT_TUPLE, [Timestamp(1, 0)]),
    "timestamp as a map key": msgpack.packb({Timestamp(1, 0): 1}),
    "timestamp of a bad length": b"\xd5\xff\x00\x00",
    "map with an array key": b"\x81\x91\x01\x02",
    "map with a map key": b"\x81\x80\x01",
    "array nested 2000 deep": b"\x91" * 2000 + b"\xc0",
    "tuples nested past wire.MAX_DEPTH": deep_tuple_payload(wire.MAX_DEPTH + 3),
    "tuples nested 5000 deep": deep_tuple_payload(5000),
    "tuple ext of a non-array": ext(wire.EXT_TUPLE, 5),
    "tuple ext with trailing bytes": ext(wire.EXT_TUPLE, msgpack.packb([1]) + b"\x00"),
    "tuple ext truncated": ext(wire.EXT_TUPLE, b"\x92\x01"),
    "tuple ext empty": ext(wire.EXT_TUPLE, b""),
    "set ext with an unhashable item": ext(wire.EXT_SET, [[1]]),
    "frozenset ext of a map": ext(wire.EXT_FROZENSET, {1: 2}),
    "datetime ext with 8 fields": datetime_ext(2024, 1, 2, 3, 4, 5, 6, 0),
    "datetime ext with a bool field": datetime_ext(2024, True, 2, 3, 4, 5, 6, 0, None),
    "datetime ext with a float field": datetime_ext(2024.0, 1, 2, 3, 4, 5, 6, 0, None),
    "datetime ext with month 13": datetime_ext(2024, 13, 2, 3, 4, 5, 6, 0, None),
    "datetime ext with fold 2": datetime_ext(2024, 1, 2, 3, 4, 5, 6, 2, None),
    "datetime ext with a 24 h offset": datetime_ext(2024, 1, 2, 3, 4, 5, 6, 0, 86_400_000_000),
    "datetime ext with a str offset": datetime_ext(2024, 1, 2, 3, 4, 5, 6, 0, "+05:45"),
    "datetime ext of raw bytes": ext(wire.EXT_DATETIME, b"\x00\x01"),
    "date ext with 2 fields": ext(wire.EXT_DATE, [2024, 1]),
    "date ext with day 0": ext(wire.EXT_DATE, [2024, 1, 0]),
    "time ext with hour 24": ext(wire.EXT_TIME, [24, 0, 0, 0, 0, None]),
    "timedelta ext too big": ext(wire.EXT_TIMEDELTA, [1_000_000_000, 0, 0]),
    "timedelta ext with a float": ext(wire.EXT_TIMEDELTA, [1.5, 0, 0]),
    "UUID ext of 15 bytes": ext(wire.EXT_UUID, bytes(15)),
    "UUID ext of 17 bytes": ext(wire.EXT_UUID, bytes(17)),
    "Decimal ext of text": ext(wire.EXT_DECIMAL, b"abc"),
    "Decimal ext of non-ASCII digits": ext(wire.EXT_DECIMAL, "١٢".encode()),
    "Decimal ext with spaces": ext(wire.EXT_DECIMAL, b" 1 "),
    "Decimal ext with underscores": ext(wire.EXT_DECIMAL, b"1_000"),
    "Decimal ext with a too big exponent": ext(wire.EXT_DECIMAL, b"1E+9999999999999999999999"),
    "Decimal ext empty": ext(wire.EXT_DECIMAL, b""),
}


@pytest.mark.parametrize("data", CORRUPT.values(), ids=CORRUPT.keys())
def test_corrupt_bytes_raise_corrupt_payload(data: bytes) -> None:
    with pytest.raises(CorruptPayload) as info:
        loads(data)
    assert str(info.value) and len(str(info.value)) < 200
    with pytest.raises(CorruptPayload):
        loads_call(data)


BAD_SHAPES: dict[str, bytes] = {
    "a scalar": dumps(5),
    "an array of one": dumps([[]]),
    "an array of three": dumps([[], {}, 1]),
    "a tuple": dumps(((), {})),
    "args as a tuple": dumps([(1,), {}]),
    "args as a map": dumps([{}, {}]),
    "kwargs as an array": dumps([[], []]),
    "an int kwargs name": dumps([[], {1: 2}]),
    "a bytes kwargs name": dumps([[], {b"to": 1}]),
}


@pytest.mark.parametrize("data", BAD_SHAPES.values(), ids=BAD_SHAPES.keys())
def test_a_job_of_the_wrong_shape_raises_corrupt_payload(data: bytes) -> None:
    with pytest.raises(CorruptPayload, match="kwargs"):
        loads_call(data)


@pytest.mark.parametrize("data", ["text", None, 5, [1]], ids=repr)
def test_a_payload_that_is_not_bytes_raises_corrupt_payload(data: Any) -> None:
    with pytest.raises(CorruptPayload, match="bytes"):
        loads(data)


@pytest.mark.parametrize("kind", [bytearray, memoryview])
def test_bytes_like_payloads_are_read(kind: Callable[[bytes], Any]) -> None:
    value = [1, (2, dt.date(2020, 1, 1)), -1]
    assert_same(value, loads(kind(dumps(value))))
    with pytest.raises(CorruptPayload):
        loads(kind(msgpack.packb([Timestamp(0, 0)])))


# ---------------------------------------------------------------- refusals

UNSUPPORTED: dict[str, tuple[Any, str]] = {
    "object": (object(), "type object"),
    "class instance": (Plain(), "Plain"),
    "lambda": (lambda: 1, "function"),
    "class": (Plain, "type type"),
    "IntEnum member": (Color.RED, "enum member"),
    "str Enum member": (Shade.DARK, "Shade"),
    "namedtuple": (Point(1, 2), "subclass of tuple"),
    "OrderedDict": (collections.OrderedDict(a=1), "OrderedDict"),
    "defaultdict": (collections.defaultdict(list), "defaultdict"),
    "dict subclass": (MyDict(), "subclass of dict"),
    "datetime subclass": (MyDatetime(2020, 1, 1), "subclass of datetime"),
    "float subclass": (MyFloat(1.0), "subclass of float"),
    "2**64": (2**64, "18446744073709551616"),
    "-2**63-1": (-(2**63) - 1, "64-bit"),
    "a huge int deep inside": ([{"k": (1, 10**30)}], "contains the int"),
    "complex": (1 + 2j, "complex"),
    "bytearray": (bytearray(b"x"), "bytes(...)"),
    "memoryview": (memoryview(b"x"), "memoryview"),
    "msgpack ExtType": (ExtType(wire.EXT_TUPLE, b"\x90"), "raw msgpack object"),
    "msgpack Timestamp": (Timestamp(0, 0), "raw msgpack object"),
    "set with an unsupported item": ({Plain()}, "Plain"),
    "set with an IntEnum": ({Color.RED}, "Color"),
    "frozenset of complex": (frozenset({1j}), "complex"),
    "unsupported deep inside": ([1, [2, {"k": (3, Plain())}]], "contains a value of type"),
    "unsupported dict key": ({Plain(): 1}, "Plain"),
    "tuple with a bytearray": ((1, bytearray(b"x")), "bytearray"),
    "range": (range(3), "range"),
    "generator": ((i for i in range(3)), "generator"),
    "Ellipsis": (..., "ellipsis"),
    "lone surrogate": ("\ud800", "UTF-8"),
    "lone surrogate inside": (["ok", {"k": "\udcff"}], "UTF-8"),
    "lists too deep": (nested(wire.MAX_DEPTH + 1, lambda x: [x]), "deep"),
    "tuples too deep": (nested(wire.MAX_DEPTH + 1, lambda x: (x,)), "deep"),
    "a list that contains itself": (self_containing_list(), "contains itself"),
}


@pytest.mark.parametrize(("value", "fragment"), UNSUPPORTED.values(), ids=UNSUPPORTED.keys())
def test_unsupported_values_raise_serialization_error(value: Any, fragment: str) -> None:
    for encode in (dumps, dumps_result):
        with pytest.raises(SerializationError) as info:
            encode(value)
        assert fragment in str(info.value)
        assert isinstance(info.value, TaskforgeError)
    with pytest.raises(SerializationError, match=r"argument #1 \(positional, 0-based\)"):
        dumps_call(("fine", value), {})
    with pytest.raises(SerializationError, match=r"argument 'culprit' \(keyword\)"):
        dumps_call((), {"fine": 1, "culprit": value})


def test_the_message_names_the_argument_type_and_what_to_do() -> None:
    with pytest.raises(SerializationError) as info:
        dumps_call(("fine",), {"to": Plain()})
    message = str(info.value)
    assert message.startswith("argument 'to' (keyword) has type ")
    assert "Plain" in message
    assert "which taskforge cannot serialize; pass one of: None, bool, int" in message
    assert message.endswith("or convert it first")


def test_a_nested_culprit_is_named_by_its_argument_and_its_own_type() -> None:
    with pytest.raises(SerializationError) as info:
        dumps_call((1, [2, {"k": (3, 1j)}]), {})
    assert str(info.value).startswith("argument #1 (positional, 0-based) contains a value of type complex (1j), which")


def test_an_out_of_range_int_argument_is_named() -> None:
    with pytest.raises(SerializationError) as info:
        dumps_call((), {"n": 2**64})
    assert str(info.value).startswith("argument 'n' (keyword) is the int 18446744073709551616")


def test_the_first_bad_argument_is_the_one_named() -> None:
    with pytest.raises(SerializationError, match=r"^argument #0 .*Plain"):
        dumps_call((Plain(), 1j), {"a": Plain()})


def test_the_return_value_is_named_as_such() -> None:
    with pytest.raises(SerializationError, match=r"^the task's return value has type .*Plain"):
        dumps_result(Plain())


@pytest.mark.parametrize("kwargs", [{1: "x"}, {b"to": "x"}, {"ok": 1, None: [1]}], ids=repr)
def test_keyword_names_must_be_str(kwargs: dict[Any, Any]) -> None:
    with pytest.raises(SerializationError, match="keyword argument names must be str"):
        dumps_call((), kwargs)


@pytest.mark.parametrize(("args", "kwargs"), [("ab", {}), ((), [("a", 1)]), (None, None)])
def test_args_must_be_a_tuple_and_kwargs_a_dict(args: Any, kwargs: Any) -> None:
    with pytest.raises(SerializationError, match="tuple"):
        dumps_call(args, kwargs)


def test_a_failure_leaves_nothing_behind() -> None:
    value = (1, (2, frozenset({3})), [dt.date(2020, 1, 1)])
    for _ in range(3):
        with pytest.raises(SerializationError):
            dumps((1, (2, frozenset({3, Plain()}))))
        with pytest.raises(CorruptPayload):
            loads(ext(wire.EXT_TUPLE, [ExtType(wire.EXT_TUPLE, b"\x92\x01")]))
        assert_same(value, loads(dumps(value)))


# ---------------------------------------------------------------- depth and threads

WRAPPERS: dict[str, Callable[[Any], Any]] = {
    "list": lambda x: [x],
    "tuple": lambda x: (x,),
    "frozenset": lambda x: frozenset({x}),
    "dict value": lambda x: {"k": x},
    "tuple and frozenset": lambda x: frozenset({x}) if type(x) is tuple else (x,),
    "list and dict": lambda x: {"k": x} if type(x) is list else [x],
}


@pytest.mark.parametrize("wrap", WRAPPERS.values(), ids=WRAPPERS.keys())
def test_nesting_up_to_max_depth_round_trips(wrap: Callable[[Any], Any]) -> None:
    leaf = dt.datetime(2024, 1, 1, tzinfo=NEPAL)  # an ext inside the innermost container
    assert_same(nested(wire.MAX_DEPTH, wrap, leaf), loads(dumps(nested(wire.MAX_DEPTH, wrap, leaf))))
    with pytest.raises(SerializationError, match=f"more than {wire.MAX_DEPTH} deep"):
        dumps(nested(wire.MAX_DEPTH + 1, wrap, leaf))


def run_in_thread(stack_size: int, work: Callable[[], Any]) -> Any:
    old = threading.stack_size(stack_size)
    try:
        with ThreadPoolExecutor(max_workers=1) as pool:
            future = pool.submit(work)
    finally:
        threading.stack_size(old)
    return future.result(timeout=60)


def test_deep_ext_nesting_is_safe_on_a_small_thread_stack() -> None:
    """msgpack.unpackb took 40-65 KiB of C stack a level here, and segfaulted."""
    value = nested(wire.MAX_DEPTH, lambda x: (x,), dt.date(2020, 1, 1))
    assert_same(value, run_in_thread(256 * 1024, lambda: loads(dumps(value))))

    def crafted() -> None:
        with pytest.raises(CorruptPayload, match="nested"):
            loads(deep_tuple_payload(2000))

    run_in_thread(256 * 1024, crafted)


def test_threads_do_not_share_codec_state() -> None:
    def work(seed: int) -> None:
        for step in range(300):
            value = (seed, [step, (frozenset({seed}), {dt.date(2020, 1, 1 + seed): step})])
            assert_same(value, loads(dumps(value)))
            assert loads_call(dumps_call((seed,), {"step": step})) == ((seed,), {"step": step})

    with ThreadPoolExecutor(max_workers=8) as pool:
        for future in [pool.submit(work, seed) for seed in range(8)]:
            future.result(timeout=60)
