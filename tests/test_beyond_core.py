"""Hooks, middleware, current_job and the testing kit, in process and in a real worker."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from taskforge import ConfigurationError, JobState, TaskForge, TaskforgeError, current_job

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


def test_testing_kit_example_runs_under_pytest_like_a_users_suite(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(ROOT / "examples" / "testing_kit")],
        cwd=ROOT / "examples" / "testing_kit", capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "3 passed" in result.stdout
