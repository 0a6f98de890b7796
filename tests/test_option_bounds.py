"""Every numeric option is bounded where it is given: at decoration, at ``with_options``, at ``TaskForge()``.

Before, ``max_attempts=2**63`` was stored as a float (shown as "1/1") and
``timeout=1e308`` passed decoration, then every ``.delay()`` raised a bare
``OverflowError``. Now an out-of-range value is a ``ConfigurationError``
naming the option, the value and the range, and nothing is registered.
"""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Any

import pytest

from taskforge import ConfigurationError, TaskForge
from taskforge.bounds import MAX_COUNT, MAX_SECONDS

NUMBERS: list[Any] = [2**63, 1e308, -1, 0.0, math.nan, math.inf, -math.inf, True, "30", None.__class__, [3]]
COUNT_OPTIONS = ["max_attempts", "concurrency", "key_concurrency"]
SECONDS_OPTIONS = ["timeout", "soft_timeout", "unique_for", "debounce", "debounce_max_wait", "expires"]
RATES: list[Any] = ["99999999999/s", "0/s", "-1/s", "nan/s", "inf/s", "5/0s", "1/99999999999d", True, 5, math.nan]
# What each option needs beside it to be accepted at all (a per-key option needs a key...).
NEEDS: dict[str, dict[str, Any]] = {
    "key_concurrency": {"key": "account"},
    "key_rate_limit": {"key": "account"},
    "debounce": {"key": "account"},
    "debounce_max_wait": {"key": "account", "debounce": 1},
}


def charge(account: str) -> str:
    return account


def refused(app: TaskForge, option: str, value: Any) -> str:
    """Decorate with ``option=value``: the ConfigurationError's text; nothing may be registered."""
    with pytest.raises(ConfigurationError) as raised:
        app.task(name="charge", **{**NEEDS.get(option, {}), option: value})(charge)  # type: ignore[call-overload]
    assert app.tasks == {}, f"{option}={value!r} registered a task"
    return str(raised.value)


def says_range(message: str, option: str, value: Any) -> None:
    assert f"{option}=" in message or f"{option} " in message, message
    assert repr(value) in message, message
    assert any(word in message for word in ("from", "at most", "one of")), message


@pytest.mark.parametrize("option", COUNT_OPTIONS)
@pytest.mark.parametrize("value", [*NUMBERS, MAX_COUNT + 1, 2.5])
def test_counts_are_bounded_at_decoration(option: str, value: Any) -> None:
    says_range(refused(TaskForge("t", broker="memory://"), option, value), option, value)


@pytest.mark.parametrize("option", SECONDS_OPTIONS)
@pytest.mark.parametrize("value", [*NUMBERS, MAX_SECONDS * 2])
def test_seconds_are_bounded_at_decoration(option: str, value: Any) -> None:
    says_range(refused(TaskForge("t", broker="memory://"), option, value), option, value)


@pytest.mark.parametrize("option", ["rate_limit", "key_rate_limit"])
@pytest.mark.parametrize("value", RATES)
def test_rates_are_bounded_at_decoration(option: str, value: Any) -> None:
    says_range(refused(TaskForge("t", broker="memory://"), option, value), option, value)


@pytest.mark.parametrize("value", [2**63, -1, math.nan, math.inf, True, "urgent", 2.5])
def test_priority_is_one_of_its_levels(value: Any) -> None:
    message = refused(TaskForge("t", broker="memory://"), "priority", value)
    assert "priority" in message and repr(value) in message and "one of" in message, message


@pytest.mark.parametrize("value", [1e308, 3601, -1, math.nan, math.inf, True, "1"])
def test_backoff_is_bounded_by_its_cap(value: Any) -> None:
    says_range(refused(TaskForge("t", broker="memory://"), "backoff", value), "backoff", value)


@pytest.mark.parametrize(
    ("option", "value"),
    [
        *[("max_attempts", v) for v in (2**63, 0, math.nan, True, "3")],
        *[("timeout", v) for v in (1e308, -1, math.nan, math.inf, True, "30")],
        *[("expires", v) for v in (1e308, -1, math.nan, math.inf, True, timedelta(days=365 * 1000))],
        *[("priority", v) for v in (2**63, math.nan, True)],
    ],
)
def test_with_options_checks_the_same_bounds(option: str, value: Any) -> None:
    app = TaskForge("t", broker="memory://")
    task = app.task(name="charge")(charge)
    with pytest.raises(ConfigurationError) as raised:
        task.with_options(**{option: value})
    assert option in str(raised.value) and repr(value) in str(raised.value), raised.value
    assert task.options.max_attempts == 3 and task.options.timeout is None  # the task itself is unchanged
    assert app.tasks == {"charge": task}


@pytest.mark.parametrize("option", ["max_size", "max_job_size"])
@pytest.mark.parametrize("value", [2**63, -1, math.nan, math.inf, True, "10", 2.5])
def test_app_counts_are_bounded(option: str, value: Any) -> None:
    with pytest.raises(ConfigurationError) as raised:
        TaskForge("t", broker="memory://", **{option: value})
    says_range(str(raised.value), option, value)


@pytest.mark.parametrize("option", ["retention", "dead_retention"])
@pytest.mark.parametrize("value", [1e308, 0, -1, math.nan, math.inf, True, "3600", timedelta(days=365 * 1000)])
def test_app_retentions_are_bounded(option: str, value: Any) -> None:
    with pytest.raises(ConfigurationError) as raised:
        TaskForge("t", broker="memory://", **{option: value})
    message = str(raised.value)
    assert f"{option}=" in message and "at most" in message, message


def test_the_largest_values_allowed_are_stored_as_given() -> None:
    # At the bounds, a job is sent and read back exactly: no float, no OverflowError.
    app = TaskForge("t", broker="memory://", max_size=MAX_COUNT, retention=MAX_SECONDS)
    options = dict(max_attempts=MAX_COUNT, timeout=MAX_SECONDS, unique_for=MAX_SECONDS, expires=MAX_SECONDS)
    task = app.task(name="charge", concurrency=MAX_COUNT, rate_limit=f"{MAX_COUNT}/s", **options)(charge)
    handle = task.delay("acme")
    info = handle.info()
    assert info.max_attempts == MAX_COUNT and isinstance(info.max_attempts, int)
    assert task.with_options(max_attempts=MAX_COUNT, timeout=MAX_SECONDS).delay("b").info().max_attempts == MAX_COUNT
