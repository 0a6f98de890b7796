"""Bad input at the API: a clear TaskforgeError naming the value, and nothing stored.

Covers task options (at decoration and in ``with_options``), argument types,
``apply_at``/``apply_in`` times (naive, aware, year 1, year 9999, DST gaps and
folds), priorities and queue names. Valid queue names must keep the hash-tag
layout: every key written for a queue hashes to one Redis Cluster slot.

Mostly on ``memory://`` (a private keyspace, so "nothing stored" is exact), with
a real-Redis pass over the same checks where the store matters.
"""

from __future__ import annotations

import decimal
import enum
import math
import uuid
from collections.abc import Callable, Iterator
from datetime import date, datetime, time, timedelta, timezone
from typing import Any
from zoneinfo import ZoneInfo

import msgpack
import pytest
import redis
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from taskforge import ConfigurationError, JobState, Priority, SerializationError, TaskForge, TaskforgeError
from taskforge.broker.keys import MAX_QUEUE_NAME, QUEUES, WORKERS, QueueKeys

SETTINGS = settings(max_examples=80, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
GLOBAL_KEYS = {QUEUES.encode(), WORKERS.encode()}


def new_app(url: str = "memory://") -> TaskForge:
    app = TaskForge("inputs", broker=url)

    @app.task(name="echo")
    def echo(*args: Any, **kwargs: Any) -> Any:
        return args, kwargs

    return app


def keyspace(app: TaskForge) -> set[bytes]:
    return set(app.broker.client.scan_iter(match="taskforge:*", count=1000))


def names_value(message: str, value: object) -> bool:
    """A message names a value by its repr, or, for a long str, by its length."""
    if isinstance(value, float) and math.isnan(value):
        return "nan" in message
    if isinstance(value, str) and len(value) > 60:
        return str(len(value)) in message
    return repr(value) in message or str(value) in message


def expect_clear_error(
    app: TaskForge, call: Callable[[], object], value: object, kind: type[TaskforgeError] = ConfigurationError
) -> TaskforgeError:
    """``call`` raises ``kind`` naming ``value``, and no key appeared."""
    before = keyspace(app)
    with pytest.raises(kind) as caught:
        call()
    assert names_value(str(caught.value), value), f"the message does not name {value!r}: {caught.value}"
    assert keyspace(app) == before, f"keys were stored on error: {sorted(keyspace(app) - before)}"
    return caught.value


# -- task options -----------------------------------------------------------------------------------------

NAN = float("nan")
BAD_OPTIONS = [
    ("max_attempts", 0),
    ("max_attempts", -1),
    ("max_attempts", 1.5),
    ("max_attempts", True),
    ("max_attempts", "3"),
    ("max_attempts", None),
    ("timeout", 0),
    ("timeout", -1),
    ("timeout", NAN),
    ("timeout", float("inf")),
    ("timeout", "5"),
    ("timeout", True),
    ("priority", "urgent"),
    ("priority", ""),
    ("priority", 4),
    ("priority", -1),
    ("priority", 1.5),
    ("priority", True),
    ("priority", None),
    ("priority", "2"),
    ("queue", ""),
    ("queue", " "),
    ("queue", "a b"),
    ("queue", "{a}"),
    ("queue", "a}"),
    ("queue", "a{"),
    ("queue", "a" * (MAX_QUEUE_NAME + 1)),
    ("queue", 5),
    ("queue", None),
    ("queue", "tab\there"),
    ("queue", "new\nline"),
    ("queue", "nbsp\u00a0"),
    ("queue", "zero\u200bwidth"),
    ("queue", "nul\x00"),
    ("backoff", -1),
    ("backoff", "x"),
    ("backoff", NAN),
    ("backoff", True),
    ("name", ""),
    ("name", " "),
    ("name", 5),
    ("retry_on", "ValueError"),
    ("retry_on", 5),
    ("retry_on", (ValueError, "KeyError")),
    ("dont_retry_on", ValueError()),
    ("dont_retry_on", int),
    ("soft_timeout", 0),
    ("soft_timeout", -1),
    ("soft_timeout", NAN),
    ("soft_timeout", "5"),
    ("soft_timeout", True),
    ("expires", 0),
    ("expires", -5),
    ("expires", NAN),
    ("expires", float("inf")),
    ("expires", "1h"),
    ("expires", True),
]


@pytest.mark.parametrize(("option", "value"), BAD_OPTIONS, ids=[f"{o}={v!r}"[:40] for o, v in BAD_OPTIONS])
def test_an_invalid_task_option_raises_at_decoration(option: str, value: object) -> None:
    app = new_app()

    def job() -> None: ...

    expect_clear_error(app, lambda: app.task(**{option: value})(job), value)
    assert "echo" in app.tasks and len(app.tasks) == 1


WITH_OPTIONS = [
    (o, v)
    for o, v in BAD_OPTIONS
    if o in ("queue", "priority", "max_attempts", "timeout", "retry_on", "dont_retry_on", "expires") and v is not None
] + [("job_id", v) for v in ("", "a b", "x" * 201, "new\nline", 5, b"bytes")]


@pytest.mark.parametrize(("option", "value"), WITH_OPTIONS, ids=[f"{o}={v!r}"[:40] for o, v in WITH_OPTIONS])
def test_an_invalid_option_raises_in_with_options(option: str, value: object) -> None:
    app = new_app()
    expect_clear_error(app, lambda: app.tasks["echo"].with_options(**{option: value}).delay(), value)


@pytest.mark.parametrize("name", ["", 5, None, b"echo"])
def test_sending_by_an_invalid_task_name_raises(name: object) -> None:
    app = new_app()
    expect_clear_error(app, lambda: app.send(name), name)


# -- priorities -------------------------------------------------------------------------------------------


def any_case(word: str) -> st.SearchStrategy[str]:
    return st.lists(st.booleans(), min_size=len(word), max_size=len(word)).map(
        lambda upper: "".join(c.upper() if u else c.lower() for c, u in zip(word, upper, strict=True))
    )


priority_names = st.sampled_from([p.name for p in Priority]).flatmap(
    lambda name: st.tuples(st.just(Priority[name]), any_case(name), st.sampled_from(["", " ", "  "]))
)


@SETTINGS
@given(case=priority_names)
def test_a_priority_name_in_any_case_is_accepted(case: tuple[Priority, str, str]) -> None:
    priority, text, pad = case
    app = new_app()
    handle = app.tasks["echo"].with_options(priority=pad + text + pad).delay()
    assert handle.info().priority is priority


@pytest.mark.parametrize("priority", [*Priority, 0, 1, 2, 3])
def test_a_priority_member_or_number_is_accepted(priority: Priority | int) -> None:
    app = new_app()
    handle = app.tasks["echo"].with_options(priority=priority).delay()
    assert handle.info().priority is Priority(priority)


names = {p.name for p in Priority}
junk_priorities = (
    st.text(max_size=12).filter(lambda t: t.strip().upper() not in names)
    | st.integers().filter(lambda n: not 0 <= n <= 3)
    | st.floats(allow_nan=False)
    | st.booleans()
    | st.binary(max_size=6)
)  # None means "unchanged" in with_options


@SETTINGS
@given(value=junk_priorities)
def test_a_junk_priority_raises_naming_it(value: object) -> None:
    app = new_app()
    expect_clear_error(app, lambda: app.tasks["echo"].with_options(priority=value).delay(), value)


# -- arguments --------------------------------------------------------------------------------------------

offsets = st.integers(-(24 * 60 - 1), 24 * 60 - 1).map(lambda m: timezone(timedelta(minutes=m)))
leaves = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats(allow_nan=False)
    | st.text(max_size=20)
    | st.binary(max_size=20)
    | st.datetimes()
    | st.datetimes(timezones=offsets)
    | st.dates()
    | st.times()
    | st.timedeltas()
    | st.uuids()
    | st.decimals(allow_nan=False)
)
hashable = st.none() | st.booleans() | st.integers(-(2**63), 2**63) | st.text(max_size=5) | st.binary(max_size=5)
values = st.recursive(
    leaves,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.tuples(inner, inner)
        | st.dictionaries(hashable, inner, max_size=3)
        | st.frozensets(hashable, max_size=3)
        | st.sets(hashable, max_size=3)
    ),
    max_leaves=10,
)


@SETTINGS
@given(args=st.lists(values, max_size=4), kwargs=st.dictionaries(st.text(max_size=8), values, max_size=3))
def test_supported_arguments_round_trip_exactly(args: list[Any], kwargs: dict[str, Any]) -> None:
    app = new_app()
    info = app.tasks["echo"].delay(*args, **kwargs).info()
    assert info.args == tuple(args) and info.kwargs == kwargs
    assert [type(a) for a in info.args] == [type(a) for a in args]


class Colour(enum.Enum):
    RED = 1


class Text(str):
    pass


def nested(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth):
        value = [value]
    return value


UNSUPPORTED = [
    object(),
    len,
    Colour.RED,
    Text("x"),
    2**64,
    -(2**63) - 1,
    bytearray(b"x"),
    memoryview(b"x"),
    complex(1, 2),
    range(3),
    Ellipsis,
    (i for i in ()),
    msgpack.ExtType(1, b""),
    "\ud800",
    [object()],
    {"k": {1, object()}},
    {1: [Colour.RED]},
    nested(120),
]


@pytest.mark.parametrize("value", UNSUPPORTED, ids=lambda v: type(v).__name__)
@pytest.mark.parametrize("how", ["positional", "keyword", "delay_many"])
def test_an_unsupported_argument_raises_naming_it_and_stores_nothing(value: object, how: str) -> None:
    app = new_app()
    echo = app.tasks["echo"]
    call = {
        "positional": lambda: echo.delay(1, value),
        "keyword": lambda: echo.delay(to=value),
        "delay_many": lambda: echo.delay_many([(1,), (2,), {"to": value}]),
    }[how]
    before = keyspace(app)
    with pytest.raises(SerializationError) as caught:
        call()
    message = str(caught.value)
    assert ("argument #1" if how == "positional" else "'to'") in message, message
    assert keyspace(app) == before


@pytest.mark.parametrize("kwargs", [{1: "x"}, {None: "x"}, {b"to": "x"}])
def test_delay_many_with_non_str_keyword_names_raises(kwargs: dict[Any, Any]) -> None:
    app = new_app()
    expect_clear_error(app, lambda: app.tasks["echo"].delay_many([kwargs]), next(iter(kwargs)), SerializationError)


# -- times ------------------------------------------------------------------------------------------------

PARIS, NEW_YORK = ZoneInfo("Europe/Paris"), ZoneInfo("America/New_York")
UTC = timezone.utc

FUTURE_TIMES = {
    "naive-means-utc": datetime(2099, 1, 1, 12, 0),
    "aware-utc": datetime(2099, 1, 1, 12, 0, tzinfo=UTC),
    "aware-plus-0530": datetime(2099, 1, 1, 12, 0, tzinfo=timezone(timedelta(hours=5, minutes=30))),
    "aware-minus-1159": datetime(2099, 1, 1, 12, 0, tzinfo=timezone(-timedelta(hours=11, minutes=59))),
    "paris-gap-fold0": datetime(2030, 3, 31, 2, 30, tzinfo=PARIS),
    "paris-gap-fold1": datetime(2030, 3, 31, 2, 30, fold=1, tzinfo=PARIS),
    "paris-ambiguous-fold0": datetime(2030, 10, 27, 2, 30, tzinfo=PARIS),
    "paris-ambiguous-fold1": datetime(2030, 10, 27, 2, 30, fold=1, tzinfo=PARIS),
    "new-york-gap-fold0": datetime(2030, 3, 10, 2, 30, tzinfo=NEW_YORK),
    "new-york-gap-fold1": datetime(2030, 3, 10, 2, 30, fold=1, tzinfo=NEW_YORK),
    "new-york-ambiguous-fold0": datetime(2030, 11, 3, 1, 30, tzinfo=NEW_YORK),
    "new-york-ambiguous-fold1": datetime(2030, 11, 3, 1, 30, fold=1, tzinfo=NEW_YORK),
    "year-9999-naive": datetime(9999, 12, 31, 23, 59, 59),
    "year-9999-aware": datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC),
    "year-9999-last-microsecond": datetime.max,
}


def as_utc(when: datetime) -> datetime:
    return (when if when.tzinfo else when.replace(tzinfo=UTC)).astimezone(UTC)


@pytest.fixture(params=["memory", "redis"])
def input_app(request: pytest.FixtureRequest) -> Iterator[TaskForge]:
    url = "memory://" if request.param == "memory" else request.getfixturevalue("redis_url")
    yield new_app(url)


@pytest.mark.parametrize("label", list(FUTURE_TIMES))
def test_apply_at_a_future_time_schedules_that_instant(input_app: TaskForge, label: str) -> None:
    when = FUTURE_TIMES[label]
    handle = input_app.tasks["echo"].apply_at(when, "x")
    info = handle.info()
    assert info.state is JobState.SCHEDULED
    assert info.scheduled_at is not None
    # To the millisecond, the instant Python itself gives this wall time (fold, gaps and all).
    assert abs(info.scheduled_at - as_utc(when)) < timedelta(milliseconds=1), (info.scheduled_at, as_utc(when))


def test_the_two_folds_of_an_ambiguous_time_are_an_hour_apart() -> None:
    app = new_app()
    echo = app.tasks["echo"]
    for early, late in (
        ("paris-ambiguous-fold0", "paris-ambiguous-fold1"),
        ("new-york-ambiguous-fold0", "new-york-ambiguous-fold1"),
    ):
        first = echo.apply_at(FUTURE_TIMES[early]).info().scheduled_at
        second = echo.apply_at(FUTURE_TIMES[late]).info().scheduled_at
        assert second - first == timedelta(hours=1)


PAST_TIMES = {
    "year-1-naive": datetime(1, 1, 1),
    "datetime-min-plus-14h": datetime.min.replace(tzinfo=timezone(timedelta(hours=14))),
    "epoch": datetime(1970, 1, 1, tzinfo=UTC),
    "before-epoch": datetime(1969, 7, 20, 20, 17, tzinfo=UTC),
    "yesterday-in-paris": datetime.now(PARIS) - timedelta(days=1),
}


@pytest.mark.parametrize("label", list(PAST_TIMES))
def test_apply_at_a_past_time_means_now(input_app: TaskForge, label: str) -> None:
    handle = input_app.tasks["echo"].apply_at(PAST_TIMES[label], "x")
    assert handle.status() is JobState.PENDING
    handle.info()


@pytest.mark.parametrize(
    "when",
    [
        datetime.max.replace(tzinfo=timezone(-timedelta(hours=12))),  # year 10000 in UTC
        datetime.max.replace(tzinfo=timezone(-timedelta(hours=23, minutes=59))),
    ],
    ids=["max-minus-12h", "max-minus-2359"],
)
def test_apply_at_beyond_year_9999_utc_is_refused_or_readable(input_app: TaskForge, when: datetime) -> None:
    """Either a clear error up front (nothing stored), or a job whose record can be read back."""
    try:
        handle = input_app.tasks["echo"].apply_at(when)
    except ConfigurationError:
        assert not any(b":job:" in key for key in keyspace(input_app))
        return
    handle.info()


@pytest.mark.parametrize(
    "delay", [timedelta.max, 1e300, 10.0**15, 2**70], ids=["timedelta-max", "1e300", "1e15", "2**70"]
)
def test_apply_in_an_absurd_delay_is_refused_or_readable(input_app: TaskForge, delay: object) -> None:
    try:
        handle = input_app.tasks["echo"].apply_in(delay)
    except ConfigurationError as exc:
        assert not any(b":job:" in key for key in keyspace(input_app)), exc
        return
    assert handle.status() is JobState.SCHEDULED
    handle.info()


@pytest.mark.parametrize("delay", [timedelta.min, -1e300, -1, timedelta(seconds=-0.5)], ids=str)
def test_apply_in_a_negative_delay_means_now(delay: object) -> None:
    assert new_app().tasks["echo"].apply_in(delay).status() is JobState.PENDING


@pytest.mark.parametrize(
    "when", [date(2030, 1, 1), "2030-01-01T00:00:00", 1893456000, None, time(12, 0)], ids=lambda v: type(v).__name__
)
def test_apply_at_something_not_a_datetime_raises(when: object) -> None:
    app = new_app()
    expect_clear_error(app, lambda: app.tasks["echo"].apply_at(when), when)


@pytest.mark.parametrize("delay", [NAN, float("inf"), float("-inf"), "10", True, None, decimal.Decimal("1")], ids=repr)
def test_apply_in_something_not_a_duration_raises(delay: object) -> None:
    app = new_app()
    expect_clear_error(app, lambda: app.tasks["echo"].apply_in(delay), delay)


# -- queue names and the hash-tag layout ------------------------------------------------------------------


def crc16(data: bytes) -> int:
    """CRC16-CCITT (XModem), the checksum Redis Cluster maps keys to slots with."""
    crc = 0
    for byte in data:
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
            crc &= 0xFFFF
    return crc


def slot(key: bytes) -> int:
    """The cluster slot of ``key``: its hash tag's, when it has a non-empty one (the cluster spec's rule)."""
    start = key.find(b"{")
    if start >= 0:
        end = key.find(b"}", start + 1)
        if end > start + 1:
            key = key[start + 1 : end]
    return crc16(key) % 16384


def test_crc16_matches_the_cluster_spec_and_redis_py() -> None:
    assert crc16(b"123456789") == 0x31C3  # the check value in the Redis Cluster spec
    from redis.crc import key_slot

    for key in (b"taskforge:{default}:pending", b"foo{}{bar}", b"{user1000}.following", "{é}".encode()):
        assert slot(key) == key_slot(key), key


def exercise(app: TaskForge, queue: str) -> None:
    """Write every kind of key a queue has: job, pending, scheduled, running, dead, seq, wake, done, stats."""
    echo = app.tasks["echo"].with_options(queue=queue)
    echo.delay("to succeed")
    waited = echo.delay("waited on")
    echo.delay("to die")
    echo.delay("to stay claimed")
    echo.apply_in(3600, "scheduled")
    with pytest.raises(TimeoutError):
        waited.result(timeout=0.001)
    claims, _ = app.broker.claims.dequeue(queue, 60_000, count=4)
    assert len(claims) == 4, claims
    app.broker.claims.succeed(queue, claims[0].id, claims[0].token, b"\xc0")
    app.broker.claims.succeed(queue, claims[1].id, claims[1].token, b"\xc0")
    app.broker.claims.fail(queue, claims[2].id, claims[2].token, "RuntimeError: x", "", None)
    echo.delay("claimed alone")
    echo.delay("left pending")
    assert len(app.broker.claims.dequeue(queue, 60_000)[0]) == 1
    app.broker.claims.tally.flush_outcomes()  # the successes counted by the client


def assert_one_slot(app: TaskForge, queue: str) -> None:
    written = {k for k in keyspace(app) if k not in GLOBAL_KEYS}
    prefix = QueueKeys(queue).prefix.encode()
    mine = {k for k in written if k.startswith(prefix)}
    kinds = {k[len(prefix) :].split(b":")[0] for k in mine}
    assert {b"job", b"pending", b"scheduled", b"dead", b"seq", b"wake", b"done", b"running", b"stats"} <= kinds, kinds
    slots = {slot(k) for k in mine}
    assert slots == {crc16(queue.encode()) % 16384}, {k: slot(k) for k in mine}


queue_chars = st.characters(
    blacklist_categories=("Cs", "Cc", "Cf", "Zs", "Zl", "Zp", "Co", "Cn"), blacklist_characters="{}"
)
valid_queue_names = st.text(queue_chars, min_size=1, max_size=MAX_QUEUE_NAME).filter(
    lambda n: n.isprintable() and not any(c.isspace() for c in n)
)


@settings(SETTINGS, max_examples=50)
@given(queue=valid_queue_names)
def test_every_key_of_a_valid_queue_is_in_one_slot(queue: str) -> None:
    app = new_app()
    exercise(app, queue)
    assert_one_slot(app, queue)


@settings(SETTINGS, max_examples=25)
@given(queue=valid_queue_names)
@example(queue="\\")  # found by this test: SCAN MATCH read the backslash as an escape
@example(queue="a[b]*?")
def test_clearing_a_valid_queue_removes_every_key_of_it(queue: str) -> None:
    app = new_app()
    exercise(app, queue)
    app.broker.cleanup.clear(queue)
    left = {k for k in keyspace(app) if k.startswith(QueueKeys(queue).prefix.encode())}
    assert not left, f"Broker.clear({queue!r}) left {sorted(left)}"


QUEUE_NAMES = [
    "default",
    "mail:high",
    "émail",
    "队列",
    "🙂",
    "a*b?[c]",
    "back\\slash",
    "q" * MAX_QUEUE_NAME,
    "%s",
    "-",
    "~`!@#$^&()=+|;'\",.<>/",
]


@pytest.mark.redis
@pytest.mark.parametrize("queue", QUEUE_NAMES, ids=lambda q: q[:12])
def test_on_real_redis_every_key_of_a_queue_is_in_one_slot(redis_url: str, queue: str) -> None:
    app = new_app(redis_url)
    exercise(app, queue)
    assert_one_slot(app, queue)
    assert queue in app.broker.jobs.queues()


invalid_queue_names = (
    st.just("")
    | st.text(min_size=MAX_QUEUE_NAME + 1, max_size=MAX_QUEUE_NAME + 40, alphabet="abc")
    | st.tuples(
        st.text(max_size=5),
        st.sampled_from(["{", "}", " ", "\t", "\n", "\x00", "\u2028", "\u00a0", "\u3000", "\x7f"]),
        st.text(max_size=5),
    ).map("".join)
)


@SETTINGS
@given(queue=invalid_queue_names)
def test_an_invalid_queue_name_raises_naming_it_and_stores_nothing(queue: str) -> None:
    app = new_app()
    expect_clear_error(app, lambda: app.tasks["echo"].with_options(queue=queue).delay(), queue)
    expect_clear_error(app, lambda: app.task(name=f"t-{uuid.uuid4().hex}", queue=queue)(lambda: None), queue)


@pytest.mark.redis
@pytest.mark.parametrize("queue", ["", "a b", "{x}", "a}b", "q" * (MAX_QUEUE_NAME + 1), "tab\t"], ids=repr)
def test_on_real_redis_an_invalid_queue_name_stores_nothing(redis_url: str, queue: str) -> None:
    app = new_app(redis_url)
    client = redis.Redis.from_url(redis_url)
    before = set(client.scan_iter())
    with pytest.raises(ConfigurationError):
        app.tasks["echo"].with_options(queue=queue).delay()
    assert set(client.scan_iter()) == before
