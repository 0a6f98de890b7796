"""An idle worker's wait and claim in one round trip (real Redis: fakeredis does not block in a pipeline)."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
import redis

from taskforge import JobState, TaskForge
from taskforge.broker.queue import new_token
from taskforge.errors import BrokerUnavailable

pytestmark = pytest.mark.redis

LEASE = 30_000


def test_a_job_enqueued_during_the_wait_is_claimed_by_it(redis_url: str) -> None:
    app = TaskForge("tests", broker=redis_url)

    @app.task
    def job(n):
        pass

    got: list = []
    waiter = threading.Thread(
        target=lambda: got.append(app.broker.claims.wait_and_dequeue("default", 10, LEASE, new_token()))
    )
    started = time.monotonic()
    waiter.start()
    time.sleep(0.2)  # the waiter is blocked by now
    handle = job.delay(7)
    waiter.join(timeout=10)
    [(claims, wait)] = got
    assert time.monotonic() - started < 5  # woken by the enqueue, not by its 10 s timeout
    assert [(c.id, c.args) for c in claims] == [(handle.id, (7,))]
    assert handle.status() is JobState.RUNNING


def test_a_claim_says_whether_more_is_ready(redis_url: str) -> None:
    """With claims, ``next_due`` is 0 while more may be ready and None once nothing else is:
    a lane woken with the only job leaves its siblings resting instead of sending one to an empty claim."""
    app = TaskForge("tests", broker=redis_url)

    @app.task
    def job():
        pass

    job.delay()
    job.delay()
    claims = app.broker.claims
    first = claims.wait_and_dequeue("default", 1, LEASE, new_token())
    assert len(first.claims) == 1 and first.next_due == 0.0  # the second job is still pending
    last = claims.wait_and_dequeue("default", 1, LEASE, new_token())
    assert len(last.claims) == 1 and last.next_due is None
    job.apply_in(60)  # scheduled, not ready: nothing for a sibling to claim now
    job.delay()
    assert claims.dequeue("default", LEASE).next_due is None


def test_a_wait_that_times_out_claims_nothing_and_says_when_to_look_again(redis_url: str) -> None:
    app = TaskForge("tests", broker=redis_url)

    @app.task
    def job():
        pass

    assert app.broker.claims.wait_and_dequeue("default", 0.05, LEASE, new_token()) == ([], None)
    job.apply_in(60)
    claims, wait = app.broker.claims.wait_and_dequeue("default", 0.05, LEASE, new_token())
    assert claims == [] and 50 < wait <= 60


def test_a_token_whose_reply_was_lost_gets_its_job_back(redis_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    app = TaskForge("tests", broker=redis_url)

    @app.task
    def job():
        pass

    handle = job.delay()
    token = new_token()
    # The dequeue script is on the server, as in a worker that claimed before: on a fresh server
    # the pipelined EVALSHA would fail NOSCRIPT, unseen behind the dropped reply, and claim nothing.
    app.broker.client.script_load(app.broker.scripts.script("dequeue").script)
    pipeline = app.broker.client.pipeline

    def reply_dropped(*args: Any, **kwargs: Any) -> Any:  # Redis runs the calls; their replies never arrive
        pipe = pipeline(*args, **kwargs)
        execute = pipe.execute

        def execute_then_drop(*a: Any, **k: Any) -> Any:
            execute(*a, **k)
            raise redis.ConnectionError("the connection dropped before the replies arrived")

        pipe.execute = execute_then_drop
        return pipe

    monkeypatch.setattr(app.broker.client, "pipeline", reply_dropped)
    with pytest.raises(BrokerUnavailable):
        app.broker.claims.wait_and_dequeue("default", 0.05, LEASE, token)
    monkeypatch.undo()
    assert handle.status() is JobState.RUNNING
    again, _ = app.broker.claims.wait_and_dequeue("default", 0.05, LEASE, token)  # the re-send
    assert [c.id for c in again] == [handle.id]
    assert again[0].attempts == 1


def test_scripts_flushed_by_redis_are_loaded_again(own_redis_url: str) -> None:
    app = TaskForge("tests", broker=own_redis_url)  # SCRIPT FLUSH empties the whole server: one of its own

    @app.task
    def job():
        pass

    try:
        handle = job.delay()
        app.broker.client.script_flush()
        claims, _ = app.broker.claims.wait_and_dequeue("default", 0.05, LEASE, new_token())
        assert [c.id for c in claims] == [handle.id]
    finally:
        app.broker.client.close()  # before its server stops: a pool left to the collector warns of its socket
