"""durability="replicated" on a Redis without replicas: the enqueue says no replica has the job."""

from __future__ import annotations

import time

import pytest

from taskforge import TaskForge
from taskforge.errors import BrokerUnavailable

pytestmark = pytest.mark.redis


def test_no_replica_to_confirm_an_enqueue_is_an_error_at_once(redis_url: str) -> None:
    app = TaskForge("durable", broker=redis_url, durability="replicated")
    task = app.task(name="durable.noop")(lambda: None)
    started = time.monotonic()
    with pytest.raises(BrokerUnavailable, match="no replica confirmed it within 1000 ms"):
        task.delay()
    # WAIT gave up after its 1 s; a plain redis:// URL has no failover to wait out.
    assert 0.9 < time.monotonic() - started < 5
