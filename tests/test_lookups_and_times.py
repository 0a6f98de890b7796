"""RQ's habits: a run knows when its job was enqueued and when it started."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from taskforge import TaskForge, current_job


def test_current_job_knows_when_it_was_enqueued_and_started(app: TaskForge) -> None:
    @app.task
    def times() -> tuple[datetime, datetime]:
        job = current_job()
        return job.enqueued_at, job.started_at

    before = datetime.now(timezone.utc) - timedelta(seconds=1)  # Redis's clock stamps enqueues
    handle = times.delay()
    app.drain()
    enqueued_at, started_at = handle.result(timeout=1)
    after = datetime.now(timezone.utc) + timedelta(seconds=1)
    assert enqueued_at.tzinfo is not None and started_at.tzinfo is not None
    assert before <= enqueued_at <= started_at <= after
    assert enqueued_at == handle.info().created_at
