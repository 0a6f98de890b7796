"""Per-minute outcome counts kept by the succeed and fail scripts (the dashboard's last hour)."""

from __future__ import annotations

from taskforge import TaskForge
from taskforge.broker.keys import QueueKeys
from tests.conftest import inspector

LEASE = 30_000


def test_succeed_and_fail_count_runs_in_the_current_minute(app: TaskForge) -> None:
    @app.task(max_attempts=2, backoff=0)
    def work(ok):
        if not ok:
            raise ValueError("no")
        return ok

    for ok in (1, 2, 3, 0):
        work.delay(ok)
    app.drain()  # three successes; the failing job runs twice (retried, then dead)
    first, history = app.broker.inspection.outcome_history(["default", "idle"], minutes=60)
    assert len(history["default"]) == 60 and history["idle"] == [(0, 0)] * 60
    assert sum(s for s, _ in history["default"]) == 3
    assert sum(f for _, f in history["default"]) == 2
    seconds, _ = app.broker.client.time()
    assert first == (int(seconds) // 60 - 59) * 60000
    key = QueueKeys("default").stats(int(seconds) // 60)
    if app.broker.client.exists(key):  # not when the minute turned during the test
        assert 0 < inspector(app).pttl(key) <= 2 * 3600 * 1000


def test_fenced_outcomes_are_not_counted(app: TaskForge) -> None:
    @app.task
    def work():
        return 1

    work.delay()
    claims, _ = app.broker.claims.dequeue("default", LEASE)
    assert not app.broker.claims.succeed("default", claims[0].id, "not-the-token", b"\x01")
    assert app.broker.claims.fail("default", claims[0].id, "not-the-token", "err", "", 0) == "fenced"
    _, history = app.broker.inspection.outcome_history(["default"], minutes=2)
    assert history["default"] == [(0, 0), (0, 0)]


def test_a_damaged_counter_never_stops_an_outcome(app: TaskForge) -> None:
    @app.task
    def work():
        return "done"

    handle = work.delay()
    seconds, _ = app.broker.client.time()
    for minute in (int(seconds) // 60, int(seconds) // 60 + 1):  # the run may fall in the next minute
        app.broker.client.set(QueueKeys("default").stats(minute), "garbage")
    app.drain()
    assert handle.result(timeout=1) == "done"
    _, history = app.broker.inspection.outcome_history(["default"], minutes=1)
    assert history["default"] == [(0, 0)]  # unreadable: counts as nothing, raises nothing
