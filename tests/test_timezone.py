"""The app's time zone: a naive datetime given to ``apply_at`` is read in it, loudly when none was set."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest

from taskforge import TaskForge
from taskforge.errors import ConfigurationError, TaskforgeError
from taskforge.zones import NAIVE_WARNED

TOKYO = timezone(timedelta(hours=9))


@pytest.fixture(autouse=True)
def fresh_process() -> Iterator[None]:
    """Each test starts as a process that has not warned yet (the warning is once per process)."""

    NAIVE_WARNED.clear()
    yield
    NAIVE_WARNED.clear()


def naive_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and "naive" in r.getMessage()]


def test_a_naive_datetime_is_read_in_the_apps_time_zone(broker_url: str, caplog: pytest.LogCaptureFixture) -> None:
    app = TaskForge("tz", broker=broker_url, timezone="Asia/Tokyo")

    @app.task
    def job() -> None: ...

    naive = job.apply_at(datetime(2031, 6, 1, 21, 30))
    expected = datetime(2031, 6, 1, 12, 30, tzinfo=timezone.utc)
    assert naive.info().scheduled_at == expected  # 21:30 in Tokyo is 12:30 UTC
    celery = job.apply_async(eta=datetime(2031, 6, 1, 21, 30))
    assert celery.info().scheduled_at == expected
    assert naive_warnings(caplog) == []  # the app said which zone: nothing to warn about


def test_a_tzinfo_is_taken_as_the_time_zone_and_daylight_saving_follows_the_date() -> None:
    app = TaskForge("tz", broker="memory://", timezone=ZoneInfo("Europe/Paris"))

    @app.task
    def job() -> None: ...

    winter = job.apply_at(datetime(2031, 1, 15, 10, 0)).info().scheduled_at
    summer = job.apply_at(datetime(2031, 7, 15, 10, 0)).info().scheduled_at
    assert winter == datetime(2031, 1, 15, 9, 0, tzinfo=timezone.utc)
    assert summer == datetime(2031, 7, 15, 8, 0, tzinfo=timezone.utc)
    fixed = TaskForge("fixed", broker="memory://", timezone=TOKYO)
    assert fixed.zone.tzinfo is TOKYO and fixed.zone.chosen


def test_without_a_time_zone_naive_is_utc_and_warns_once_per_process(caplog: pytest.LogCaptureFixture) -> None:
    app = TaskForge("tz", broker="memory://")
    other = TaskForge("other", broker="memory://")

    @app.task
    def job() -> None: ...

    @other.task
    def job2() -> None: ...

    first = job.apply_at(datetime(2031, 6, 1, 12, 30))
    job.apply_at(datetime(2031, 6, 1, 12, 31))
    job2.apply_async(eta=datetime(2031, 6, 1, 12, 32))
    assert first.info().scheduled_at == datetime(2031, 6, 1, 12, 30, tzinfo=timezone.utc)
    [warning] = naive_warnings(caplog)
    assert "TaskForge(timezone=" in warning and "UTC" in warning
    assert [r.name for r in caplog.records if r.getMessage() == warning] == ["taskforge"]
    assert app.zone.tzinfo is timezone.utc and not app.zone.chosen


def test_an_aware_datetime_is_unaffected_and_never_warns(caplog: pytest.LogCaptureFixture) -> None:
    plain = TaskForge("plain", broker="memory://")
    tokyo = TaskForge("tokyo", broker="memory://", timezone="Asia/Tokyo")
    when = datetime(2031, 6, 1, 14, 30, tzinfo=timezone(timedelta(hours=2)))
    for app in (plain, tokyo):

        @app.task(name="job")
        def job() -> None: ...

        assert job.apply_at(when).info().scheduled_at == when
    assert naive_warnings(caplog) == []


def test_utc_given_by_name_is_a_choice_and_does_not_warn(caplog: pytest.LogCaptureFixture) -> None:
    app = TaskForge("tz", broker="memory://", timezone="UTC")

    @app.task
    def job() -> None: ...

    assert job.apply_at(datetime(2031, 6, 1, 12, 30)).info().scheduled_at == datetime(
        2031, 6, 1, 12, 30, tzinfo=timezone.utc
    )
    assert naive_warnings(caplog) == []


@pytest.mark.parametrize("given", ["Mars/Olympus_Mons", "", "../etc/passwd", 9, "UTC+9"])
def test_an_invalid_time_zone_raises_at_construction(given: object) -> None:
    with pytest.raises(ConfigurationError, match=r"timezone=.*IANA") as raised:
        TaskForge("tz", broker="memory://", timezone=given)  # type: ignore[arg-type]
    assert isinstance(raised.value, TaskforgeError)


def test_sleep_until_keeps_reading_a_naive_datetime_as_utc(caplog: pytest.LogCaptureFixture) -> None:
    """Durable steps' contract: ``sleep_until``'s naive datetime means UTC, whatever the app's zone."""
    from taskforge import current_job

    app = TaskForge("tz", broker="memory://", timezone="Asia/Tokyo")

    @app.task
    def later() -> str:
        current_job().sleep_until(datetime.now(timezone.utc).replace(tzinfo=None) + timedelta(seconds=20))
        return "awake"

    handle = later.delay()
    app.drain()
    scheduled = handle.info().scheduled_at
    assert scheduled is not None
    assert abs((scheduled - datetime.now(timezone.utc)).total_seconds() - 20) < 10
    app.drain(advance=60)
    assert handle.result() == "awake"


def test_aapply_at_reads_a_naive_datetime_in_the_apps_time_zone_too() -> None:
    app = TaskForge("tz", broker="memory://", timezone="Asia/Tokyo")

    @app.task
    def job() -> None: ...

    handle = asyncio.run(job.aapply_at(datetime(2031, 6, 1, 21, 30)))
    assert handle.info().scheduled_at == datetime(2031, 6, 1, 12, 30, tzinfo=timezone.utc)
