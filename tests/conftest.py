"""Shared fixtures: the same tests run on ``memory://`` and on a real Redis.

Locally a missing Redis skips the real-Redis half; under CI (CI=true) it is a
failure, so a green CI always means the suite ran against real Redis.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
import redis

from taskforge import TaskForge

REDIS_URL = os.environ.get("TASKFORGE_TEST_REDIS", "redis://127.0.0.1:6379/15")
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def skip_or_fail(reason: str) -> None:
    """Locally a missing service or tool skips; under CI it fails, so a green CI means every test ran."""
    if IN_CI:
        pytest.fail(f"under CI: {reason}")
    pytest.skip(reason)


def real_redis_or_skip() -> redis.Redis:
    client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2)
    try:
        client.ping()
    except redis.ConnectionError as exc:
        skip_or_fail(f"no Redis at {REDIS_URL}: {exc}")
    return client


@pytest.fixture
def redis_url() -> Iterator[str]:
    """A clean real-Redis database for one test."""
    client = real_redis_or_skip()
    client.flushdb()
    yield REDIS_URL
    client.flushdb()
    client.close()


@pytest.fixture(params=["memory", "redis"])
def broker_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """Each test using this runs twice: in-process fakeredis, then real Redis."""
    if request.param == "memory":
        yield "memory://"
        return
    yield request.getfixturevalue("redis_url")


@pytest.fixture
def app(broker_url: str) -> TaskForge:
    return TaskForge("tests", broker=broker_url)
