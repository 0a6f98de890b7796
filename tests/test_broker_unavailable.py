"""Without a reachable Redis every call fails fast with a BrokerUnavailable that helps.

Port 1 on localhost refuses connections at once, so these tests need no Redis.
"""

from __future__ import annotations

import time
import traceback

import pytest

from taskforge import BrokerUnavailable, ConfigurationError, JobHandle, TaskForge, TaskforgeError

DOWN = "redis://127.0.0.1:1/0"
FAST = 5.0  # seconds: what "fails fast" means here


def make_app(url: str) -> TaskForge:
    app = TaskForge("down", broker=url)

    @app.task
    def job(x=None):
        return x

    return app


def timed_failure(call, *args, **kwargs) -> BrokerUnavailable:
    started = time.monotonic()
    with pytest.raises(BrokerUnavailable) as raised:
        call(*args, **kwargs)
    elapsed = time.monotonic() - started
    assert elapsed < FAST, f"{call} took {elapsed:.1f} s to report the broker down"
    return raised.value


def test_delay_raises_broker_unavailable_naming_the_url_within_seconds() -> None:
    app = make_app(DOWN)
    error = timed_failure(app.tasks[next(iter(app.tasks))].delay, 1)
    message = str(error)
    assert DOWN in message, message
    assert "TASKFORGE_BROKER_URL" in message and "check that Redis is running" in message
    assert isinstance(error, TaskforgeError) and isinstance(error, ConnectionError)


def test_every_producer_call_raises_it() -> None:
    app = make_app(DOWN)
    (task,) = app.tasks.values()
    for call, args in [
        (task.apply_in, (60,)),
        (task.delay_many, ([(1,), (2,)],)),
        (app.send, ("elsewhere.job",)),
    ]:
        assert DOWN in str(timed_failure(call, *args))


@pytest.mark.parametrize(
    "url",
    [
        "redis://user:s3cr3t-pw@127.0.0.1:1/0",
        "redis://:s3cr3t-pw@127.0.0.1:1/0",
        "redis://user:s3cr3t%40pw@127.0.0.1:1/0",
    ],
)
def test_a_password_in_the_url_is_never_shown(url: str) -> None:
    app = make_app(url)
    (task,) = app.tasks.values()
    error = timed_failure(task.delay)
    shown = "".join(traceback.format_exception(error)) + repr(app)
    assert "***" in str(error) and "127.0.0.1:1/0" in str(error)
    assert "s3cr3t" not in shown, shown
    for linked in (error.__cause__, error.__context__):
        assert linked is None or "s3cr3t" not in str(linked)


def test_status_result_info_and_cancel_raise_it() -> None:
    app = make_app(DOWN)
    known_queue = JobHandle(app, "0" * 32, "default")
    for call, args in [
        (app.job, ("0" * 32,)),  # the lookup itself reaches for Redis
        (known_queue.status, ()),
        (known_queue.result, (10,)),
        (known_queue.info, ()),
        (known_queue.cancel, ()),
    ]:
        assert DOWN in str(timed_failure(call, *args))


def test_an_unknown_scheme_raises_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="unknown scheme 'amqp'") as raised:
        app = make_app("amqp://guest:hunter2@localhost:5672//")
        (task,) = app.tasks.values()
        task.delay()
    assert "hunter2" not in str(raised.value)
    assert "redis://" in str(raised.value), "the message should list the schemes to use"


def test_the_environment_variable_is_used_when_broker_is_absent(monkeypatch: pytest.MonkeyPatch) -> None:
    url = "redis://127.0.0.1:1/7"
    monkeypatch.setenv("TASKFORGE_BROKER_URL", url)
    app = TaskForge("env")
    assert app.url == url
    assert url in str(timed_failure(app.job, "x"))
    assert TaskForge("explicit", broker="memory://").url == "memory://", "broker= wins over the variable"


def test_the_default_is_localhost(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TASKFORGE_BROKER_URL", raising=False)
    assert TaskForge("default").url == "redis://localhost:6379/0"
    assert TaskForge("empty", broker=None).url == "redis://localhost:6379/0"


def test_creating_an_app_never_touches_the_network() -> None:
    started = time.monotonic()
    app = make_app(DOWN)
    assert app._broker is None and time.monotonic() - started < 1
    (task,) = app.tasks.values()
    assert task(5) == 5, "a plain call runs inline, broker or not"
