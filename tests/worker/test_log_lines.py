"""The pieces of a worker's log, without a worker: outage pacing, the job line's level, the job filter."""

from __future__ import annotations

import logging
import threading

import pytest
import redis

from taskforge.broker.queue import Claim
from taskforge.context import enter, leave
from taskforge.errors import BrokerUnavailable
from taskforge.logs import JobContextFilter, configure_logging, job_context_enabled
from taskforge.worker.joblog import outcome_line
from taskforge.worker.outage import Outage, cause


def unavailable(inner: Exception) -> BrokerUnavailable:
    """A BrokerUnavailable raised the way the broker raises it: ``from None`` over the redis-py error."""
    try:
        try:
            raise inner
        except Exception:
            raise BrokerUnavailable("cannot reach the broker at redis://:***@h/0 (a long story)") from None
    except BrokerUnavailable as exc:
        return exc


def test_an_outage_is_said_once_reminded_with_backoff_and_ended_once(caplog: pytest.LogCaptureFixture) -> None:
    now = [100.0]
    outage = Outage("redis://user:secret@h:6379/0", clock=lambda: now[0])
    caplog.set_level(logging.INFO, "taskforge.worker")
    outage.answered()  # no outage under way: nothing to say
    for second in range(31):
        now[0] = 100.0 + second
        outage.failed(unavailable(redis.ConnectionError("refused")))
    now[0] = 131.5
    outage.answered()
    outage.answered()
    said = [(r.levelname, r.getMessage()) for r in caplog.records]
    assert said == [
        ("WARNING", "broker redis://user:***@h:6379/0 unreachable (ConnectionError); retrying"),
        ("WARNING", "broker redis://user:***@h:6379/0 still unreachable after 2 s (ConnectionError)"),
        ("WARNING", "broker redis://user:***@h:6379/0 still unreachable after 6 s (ConnectionError)"),
        ("WARNING", "broker redis://user:***@h:6379/0 still unreachable after 14 s (ConnectionError)"),
        ("WARNING", "broker redis://user:***@h:6379/0 still unreachable after 30 s (ConnectionError)"),
        ("INFO", "reconnected to redis://user:***@h:6379/0 after 31.5 s"),
    ]
    assert not outage.down


@pytest.mark.parametrize(
    ("inner", "named"),
    [
        (redis.TimeoutError("slow"), "TimeoutError"),
        (redis.ResponseError("LOADING Redis is loading the dataset in memory"), "LOADING"),
        (redis.AuthenticationError("invalid password"), "AuthenticationError"),
    ],
)
def test_the_cause_is_the_error_under_broker_unavailable(inner: Exception, named: str) -> None:
    assert cause(unavailable(inner)) == named
    assert cause(redis.ConnectionError("raw")) == "ConnectionError"


@pytest.mark.parametrize(
    ("state", "level", "ending"),
    [
        ("succeeded", logging.INFO, "attempt 1/3 succeeded in 0.250 s"),
        ("retrying", logging.INFO, "attempt 1/3 failed after 0.250 s (ValueError: no); retrying in 1.7 s"),
        ("dead", logging.ERROR, "attempt 1/3 failed after 0.250 s (ValueError: no); the job is dead"),
        ("fenced", logging.WARNING, "not recorded: another worker took the job over"),
        (None, logging.WARNING, "not recorded: its lease will expire and it will be reclaimed"),
    ],
)
def test_each_outcome_has_its_level(state: str | None, level: int, ending: str) -> None:
    error = None if state == "succeeded" else "ValueError: no\nTraceback follows"
    said_level, text = outcome_line("t", "j", "1/3", state, 0.25, error, 1.7)
    assert said_level == level and text.startswith("task t job j attempt 1/3") and text.endswith(ending), text


def test_a_run_that_lost_its_worker_is_not_said_as_a_retry() -> None:
    level, text = outcome_line("t", "j", "1/1", "retrying", 0.5, "WorkerCrashed: killed", 0.2, lost=True)
    assert level == logging.WARNING
    assert text.endswith("its worker was lost, which uses no attempt: back in line in 0.2 s")


def test_a_long_error_is_cut_to_one_short_line() -> None:
    _, text = outcome_line("t", "j", "3/3", "dead", 1.0, "ValueError: " + "x" * 5000 + "\nmore")
    assert len(text) < 400 and text.endswith("...); the job is dead")


def claim(job_id: str, task: str) -> Claim:
    return Claim(
        id=job_id,
        queue="default",
        token="t",
        task=task,
        args=(),
        kwargs={},
        attempts=1,
        max_attempts=3,
        timeout=None,
        priority=1,
    )


def test_the_filter_tags_records_of_the_job_running_in_this_thread_only() -> None:
    tagged: dict[str, list[str]] = {}
    job_filter = JobContextFilter()

    def record() -> logging.LogRecord:
        entry = logging.LogRecord("user", logging.INFO, __file__, 1, "hello", None, None)
        job_filter.filter(entry)
        return entry

    def lane(job_id: str) -> None:
        token = enter(claim(job_id, f"app.{job_id}"), None)
        try:
            entry = record()
            tagged[job_id] = [entry.job_id, entry.task, entry.job]  # type: ignore[attr-defined]
        finally:
            leave(token)

    threads = [threading.Thread(target=lane, args=(job_id,)) for job_id in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    assert tagged == {"a": ["a", "app.a", "app.a[a]: "], "b": ["b", "app.b", "app.b[b]: "]}
    outside = record()
    assert (outside.job_id, outside.task, outside.job) == ("", "", "")  # type: ignore[attr-defined]


def test_the_job_context_can_be_switched_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TASKFORGE_LOG_JOB_CONTEXT", "0")
    assert not job_context_enabled()
    monkeypatch.setenv("TASKFORGE_LOG_JOB_CONTEXT", "1")
    assert job_context_enabled()
    root = logging.getLogger()
    before = list(root.handlers)
    configure_logging("info", "child 0 pid 1", job_context=False)
    try:
        [added] = [h for h in root.handlers if h not in before]
        assert not added.filters and "%(job)s" not in added.formatter._fmt  # type: ignore[union-attr]
    finally:
        root.handlers = before
