"""A report that ran in Redis but whose reply was lost is the run's own outcome, not a takeover.

The reply of the first ``succeed`` (or ``fail``) script run is dropped, as
``tests/broker/lost_reply.py`` drops one: the script ran for real, the client
saw a connection error. The runner retries, is refused (the job is no longer
running under its token) and must read the job back: its own success stays a
success, ``job_succeeded`` fires once, and no "fenced" outcome is reported.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import redis

from taskforge import TaskForge
from taskforge.broker import Broker
from taskforge.worker.runner import AppContext, Outcome, run_claim


@contextmanager
def reply_lost(broker: Broker, script: str) -> Iterator[list[Any]]:
    """The first run of ``script`` happens in Redis; its reply never reaches the caller."""
    seen: list[Any] = []
    real = broker.scripts.run

    def run_then_drop(call: Any) -> Any:
        reply = real(call)
        if call.name == script and not seen:
            seen.append(reply)
            raise redis.ConnectionError("the connection dropped before the reply arrived")
        return reply

    broker.scripts.run = run_then_drop  # type: ignore[method-assign]
    try:
        yield seen
    finally:
        del broker.scripts.run


def run_with_lost_reply(app: TaskForge, script: str, chain: bool = False) -> tuple[Outcome, dict[str, list[str]]]:
    fired: dict[str, list[str]] = {"job_succeeded": [], "job_failed": [], "job_dead": []}
    for name, ids in fired.items():
        app.hooks.on(name)(lambda event, ids=ids: ids.append(event.job.id if event.job else ""))  # type: ignore[misc]
    [claim], _ = app.broker.claims.dequeue("default", lease_ms=30_000)
    with reply_lost(app.broker, script) as seen:
        outcome = run_claim(AppContext.of(app), claim)
    assert seen, f"the {script} script never ran"
    return outcome, fired


def test_a_lost_success_reply_is_still_this_runs_success(app: TaskForge) -> None:
    @app.task
    def double(x: int) -> int:
        return 2 * x

    handle = double.delay(21)
    outcome, fired = run_with_lost_reply(app, "succeed")
    assert outcome.state == "succeeded"  # not "fenced": "another worker took the job over"
    assert fired["job_succeeded"] == [handle.id]
    assert handle.result(timeout=5) == 42


def test_a_lost_failure_reply_is_still_this_runs_failure(app: TaskForge) -> None:
    @app.task(max_attempts=1)
    def broken() -> None:
        raise ValueError("no")

    handle = broken.delay()
    outcome, fired = run_with_lost_reply(app, "fail")
    assert outcome.state == "dead"
    assert fired["job_failed"] == [handle.id] and fired["job_dead"] == [handle.id]


def test_a_lost_retry_reply_is_still_a_retry(app: TaskForge) -> None:
    @app.task(max_attempts=3, backoff=60)
    def flaky() -> None:
        raise ValueError("later")

    handle = flaky.delay()
    outcome, fired = run_with_lost_reply(app, "fail")
    assert outcome.state == "retrying"
    assert fired["job_failed"] == [handle.id] and fired["job_dead"] == []


def test_a_takeover_is_still_fenced(app: TaskForge) -> None:
    """The read-back never claims another run's outcome: a real takeover stays refused."""

    @app.task
    def noop() -> None:
        return None

    noop.delay()
    [claim], _ = app.broker.claims.dequeue("default", lease_ms=30_000)
    assert app.broker.claims.succeed("default", claim.id, "another-token", b"\x90") is False
    app.broker.client.hset(f"taskforge:{{default}}:job:{claim.id}", "token", "another-token")
    assert app.broker.claims.succeed("default", claim.id, "another-token", b"\xc0") is True
    assert run_claim(AppContext.of(app), claim).state == "fenced"
