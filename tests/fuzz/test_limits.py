"""The maximum job size: refused at enqueue with a clear error and nothing stored; an oversized
result fails its job (in a real worker) instead of growing Redis.
"""

from __future__ import annotations

import pytest

from taskforge import JobState, SerializationError, TaskFailed, TaskForge
from taskforge.app import DEFAULT_MAX_JOB_SIZE
from taskforge.serialization import dumps_call
from tests.conftest import admin_client

MIB = 1024 * 1024
LIMIT = 4096


def limited_app(url: str, limit: int = LIMIT) -> TaskForge:
    app = TaskForge("limits", broker=url, max_job_size=limit)

    @app.task(name="store")
    def store(data: object = None, **kwargs: object) -> None: ...

    return app


def job_keys(app: TaskForge) -> set[bytes]:
    return set(app.broker.client.scan_iter(match="taskforge:*:job:*", count=1000))


def arg_of_size(total: int) -> bytes:
    """A bytes argument whose job payload ``dumps_call((arg,), {})`` is exactly ``total`` bytes."""
    size = total - len(dumps_call((b"",), {}))
    while len(dumps_call((b"x" * size,), {})) > total:  # the bin header grows with the length
        size -= 1
    assert len(dumps_call((b"x" * size,), {})) == total
    return b"x" * size


def expect_refused(app: TaskForge, call) -> SerializationError:
    before = job_keys(app)
    with pytest.raises(SerializationError) as caught:
        call()
    message = str(caught.value)
    assert f"{app.max_job_size:,}" in message and "max_job_size" in message, message
    assert job_keys(app) == before, f"stored despite the error: {sorted(job_keys(app) - before)}"
    return caught.value


def test_the_default_limit_is_16_mib() -> None:
    assert DEFAULT_MAX_JOB_SIZE == 16 * MIB
    assert TaskForge("x", broker="memory://").max_job_size == 16 * MIB


def test_a_job_just_under_the_limit_is_stored_one_byte_over_is_not(broker_url: str) -> None:
    """The payload alone at LIMIT + 1 bytes is over; LIMIT - 64 leaves room for the task name."""
    app = limited_app(broker_url)
    store = app.tasks["store"]
    assert store.delay(arg_of_size(LIMIT - 64)).status() is JobState.PENDING
    expect_refused(app, lambda: store.delay(arg_of_size(LIMIT + 1)))


@pytest.mark.parametrize("how", ["delay", "apply_in", "apply_at", "send", "keyword", "with_options"])
def test_every_way_to_enqueue_enforces_the_limit(broker_url: str, how: str) -> None:
    from datetime import datetime, timezone

    app = limited_app(broker_url)
    store = app.tasks["store"]
    big = b"x" * (2 * LIMIT)
    call = {
        "delay": lambda: store.delay(big),
        "apply_in": lambda: store.apply_in(60, big),
        "apply_at": lambda: store.apply_at(datetime(2099, 1, 1, tzinfo=timezone.utc), big),
        "send": lambda: app.send("store", big),
        "keyword": lambda: store.delay(data=big),
        "with_options": lambda: store.with_options(priority="high").delay(big),
    }[how]
    expect_refused(app, call)


def test_delay_many_with_one_oversized_job_stores_none(broker_url: str) -> None:
    app = limited_app(broker_url)
    calls = [(b"small",)] * 5 + [(b"x" * (2 * LIMIT),)] + [(b"small",)] * 5
    error = expect_refused(app, lambda: app.tasks["store"].delay_many(calls))
    assert "#5" in str(error) and "nothing was stored" in str(error)


def test_the_default_limit_refuses_17_mib_and_takes_15(broker_url: str) -> None:
    app = TaskForge("limits", broker=broker_url)

    @app.task(name="store")
    def store(data: bytes) -> None: ...

    expect_refused(app, lambda: store.delay(b"x" * (17 * MIB)))
    assert store.delay(b"x" * (15 * MIB)).status() is JobState.PENDING


def test_zero_means_no_limit() -> None:
    app = limited_app("memory://", limit=0)
    assert app.tasks["store"].delay(b"x" * (17 * MIB)).status() is JobState.PENDING


@pytest.mark.parametrize("limit", [-1, 1.5, "16M", True, None])
def test_an_invalid_limit_is_refused(limit: object) -> None:
    from taskforge import ConfigurationError

    with pytest.raises(ConfigurationError, match="max_job_size"):
        TaskForge("x", broker="memory://", max_job_size=limit)


def test_the_limit_covers_the_whole_job_not_only_its_arguments() -> None:
    """A job sent by a name longer than the limit is as big as one with arguments that long."""
    app = limited_app("memory://")
    expect_refused(app, lambda: app.send("t" * (2 * LIMIT)))


@pytest.mark.redis
@pytest.mark.slow
def test_an_oversized_result_fails_the_job_and_is_not_stored(start_worker, redis_url: str) -> None:
    worker = start_worker("-c", "1", "-q", "fuzz")
    producer = TaskForge("producer", broker=redis_url)
    client = admin_client(redis_url)
    # The worker's app has the default limit of 16 MiB; the producer does not know the task.
    handle = producer.task_for("big_result").with_options(queue="fuzz").delay(17 * MIB)
    with pytest.raises(TaskFailed) as caught:
        handle.result(timeout=60)
    info = handle.info()
    assert info.state is JobState.DEAD and info.attempts == 1
    assert "SerializationError" in info.error and "max_job_size" in info.error and f"{16 * MIB:,}" in info.error
    assert "max_job_size" in str(caught.value)
    key = f"taskforge:{{fuzz}}:job:{handle.id}"
    assert client.hget(key, "result") is None
    assert client.memory_usage(key) < 64 * 1024
    # Nothing else holds it either (this database only: the tests running beside this one fill others).
    assert sum(client.memory_usage(k) or 0 for k in client.scan_iter()) < 8 * MIB
    # The worker is fine and serves the next job.
    assert producer.task_for("small_result").with_options(queue="fuzz").delay().result(timeout=30) == "fits"
    assert worker.proc.poll() is None
