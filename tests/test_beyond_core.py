"""Hooks, middleware, current_job and the testing kit, in process and in a real worker."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from taskforge import ConfigurationError, JobState, TaskForge, TaskforgeError, current_job
from tests.conftest import inspector

ROOT = Path(__file__).resolve().parents[1]


def test_hooks_and_middleware_wrap_every_run(app: TaskForge) -> None:
    seen: list[tuple[str, str]] = []

    @app.on("job_started")
    def started(event):
        seen.append((event.name, event.job.task))

    @app.on("job_succeeded")
    def ok(event):
        seen.append((event.name, repr(event.result)))

    @app.on("job_failed")
    def failed(event):
        seen.append((event.name, event.error))

    @app.on("job_dead")
    def dead(event):
        seen.append((event.name, event.job.state.value))

    @app.on("job_succeeded")
    def broken(event):
        raise RuntimeError("a hook that raises changes nothing")

    @app.middleware
    def outer(job, call_next):
        seen.append(("outer", job.id == handle_ok.id or job.task))
        return call_next()

    @app.middleware
    def inner(job, call_next):
        value = call_next()
        return value * 2 if isinstance(value, int) else value

    @app.task
    def add(a, b):
        return a + b

    @app.task(max_attempts=1)
    def boom():
        raise ValueError("no")

    handle_ok = add.delay(1, 2)
    handle_bad = boom.delay()
    app.drain()
    assert handle_ok.result(timeout=1) == 6  # the inner middleware doubled it
    assert handle_bad.status() is JobState.DEAD
    assert ("job_succeeded", "6") in seen and ("job_failed", "ValueError: no") in seen
    assert ("job_dead", "dead") in seen and ("job_started", add.name) in seen
    assert seen.index(("outer", True)) < seen.index(("job_succeeded", "6"))


def test_unknown_event_is_refused() -> None:
    app = TaskForge("x", broker="memory://")
    with pytest.raises(ConfigurationError, match="job_started"):
        app.on("job_exploded")


def test_current_job_and_progress(app: TaskForge) -> None:
    @app.task
    def report():
        job = current_job()
        job.set_progress(0.25, "a quarter")
        return (job.id, job.attempt)

    handle = report.delay()
    [info] = app.drain()
    assert handle.result(timeout=1) == (handle.id, 1)
    assert info.progress == 0.25 and info.progress_message == "a quarter"
    with pytest.raises(TaskforgeError, match="only available inside a task"):
        current_job()
    from taskforge.context import CurrentJob

    with pytest.raises(ConfigurationError):
        CurrentJob("i", 1, "t", "q", "tok", None).set_progress(float("nan"))


def test_drain_advance_plays_out_retries_and_schedules(app: TaskForge) -> None:
    calls = []

    @app.task(max_attempts=3, backoff=600)
    def flaky():
        calls.append(1)
        if len(calls) < 3:
            raise RuntimeError("not yet")
        return "done"

    later = flaky.apply_in(3600)
    assert app.drain() == []
    ran = app.drain(advance=7200)
    assert [i.state for i in ran] == [JobState.RETRYING, JobState.RETRYING, JobState.SUCCEEDED]
    assert later.result(timeout=1) == "done"


def test_drain_goes_on_past_a_corrupt_job_dead_lettered_at_the_claim(app: TaskForge) -> None:
    @app.task
    def echo(x: int) -> int:
        return x

    corrupt = echo.delay(1)
    fine = echo.delay(2)
    client = inspector(app)
    [key] = [k for k in client.keys(f"*{corrupt.id}*") if b":job:" in k]
    client.hset(key, "payload", b"\xc1")  # no msgpack value starts with 0xc1
    assert [i.id for i in app.drain()] == [fine.id]
    assert corrupt.status() is JobState.DEAD and fine.result(timeout=1) == 2


def test_testing_kit_example_runs_under_pytest_like_a_users_suite(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(ROOT / "examples" / "testing_kit")],
        cwd=ROOT / "examples" / "testing_kit",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "3 passed" in result.stdout


def test_periodic_options_are_checked_and_status_lists_them(app: TaskForge) -> None:
    from datetime import timedelta

    from taskforge import status

    @app.periodic(cron="*/5 * * * *", timezone="Europe/Paris")
    def cleanup():
        pass

    @app.periodic(every=timedelta(seconds=30), queue="beats")
    def beat():
        pass

    for bad in (
        {"cron": "every day"},
        {"every": 0.5},
        {},
        {"cron": "* * * * *", "every": 5},
        {"cron": "* * * * *", "timezone": "Mars/Olympus"},
    ):
        with pytest.raises(ConfigurationError):
            app.periodic(**bad)(lambda: None)
    snapshot = status.status(app).to_dict()["periodic"]
    assert [p["task"] for p in snapshot] == [cleanup.name, beat.name]
    assert snapshot[0]["schedule"] == "cron '*/5 * * * *' (Europe/Paris)" and snapshot[1]["queue"] == "beats"


def test_scheduler_enqueues_each_tick_once_and_catches_up_at_most_once(app: TaskForge) -> None:
    from datetime import datetime, timezone

    from taskforge.periodic import Scheduler

    @app.periodic(every=60)
    def minutely():
        pass

    first, second = Scheduler(app.schedules), Scheduler(app.schedules)
    noon = datetime(2030, 1, 1, 12, 0, 30, tzinfo=timezone.utc)
    assert first.run_due(noon) == 1  # the latest tick (12:00), once: no burst of missed ones
    assert second.run_due(noon) == 0  # another worker: the same tick is already enqueued
    assert first.run_due(noon) == 0
    assert second.run_due(noon.replace(minute=1)) == 1 and first.run_due(noon.replace(minute=1)) == 0
    assert app.broker.inspection.counts("default")["pending"] == 2
    # A running scheduler that stalled past a tick enqueues it late, one at most; a scheduler starting
    # now replays nothing.
    assert first.run_due(noon.replace(minute=3)) == 2  # 12:02 missed by both, then 12:03
    assert first.run_due(noon.replace(minute=6)) == 2  # 12:05 and 12:06; 12:04 is not replayed
    assert Scheduler(app.schedules).run_due(noon.replace(minute=9)) == 1  # 12:09 only
    assert app.broker.inspection.counts("default")["pending"] == 7


def test_unique_rate_and_concurrency_options(app: TaskForge) -> None:
    from taskforge.task import parse_rate_limit

    assert parse_rate_limit("100/m") == (100, 60.0) and parse_rate_limit("5/10s") == (5, 10.0)
    for bad in ("100", "0/s", "x/m", "10/fortnight"):
        with pytest.raises(ConfigurationError):
            parse_rate_limit(bad)
    with pytest.raises(ConfigurationError):
        app.task(concurrency=0)(lambda: None)

    @app.task(unique_key=lambda user_id, **_: str(user_id))
    def rebuild(user_id, reason=""):
        return user_id

    a, b = rebuild.delay(1, reason="x"), rebuild.delay(1, reason="y")
    c = rebuild.delay(2)
    assert a.id == b.id != c.id
    app.drain()
    assert rebuild.delay(1).id != a.id  # finished: the lock went with it


def test_a_limited_task_never_blocks_the_rest_of_its_queue(app: TaskForge) -> None:
    @app.task(concurrency=1)
    def narrow(n):
        pass

    @app.task
    def wide(n):
        pass

    first = narrow.delay(1)
    narrow.delay(2)
    wide.delay(3)
    claims, _ = app.broker.claims.dequeue("default", 60_000)
    assert claims[0].id == first.id
    claims, _ = app.broker.claims.dequeue("default", 60_000)
    assert claims[0].task == wide.name  # narrow #2 waits for its slot; wide goes past it
    assert app.broker.claims.dequeue("default", 60_000)[0] == []
    assert app.broker.inspection.counts("default")["pending"] == 1
