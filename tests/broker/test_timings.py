"""Wait and run time histograms per queue, task and minute (``broker/timings.py``), on memory:// and Redis."""

from __future__ import annotations

import time

import pytest

from taskforge import TaskForge
from taskforge.broker.keys import QueueKeys
from taskforge.broker.timings import (
    BOUNDS,
    OVERFLOW,
    RATIO,
    bucket_of,
    field_name,
    merged,
    parse_field,
    percentile,
    ready_s,
)
from taskforge.job_ids import new_job_id
from tests.conftest import inspector

LEASE = 30_000


def within_bucket(value: float | None, seconds: float) -> bool:
    """True when ``value`` lies in the bucket that ``seconds`` falls in."""
    bucket = bucket_of(seconds)
    low = BOUNDS[bucket - 1] if bucket else 0.0
    return value is not None and low <= value <= BOUNDS[bucket] * 1.000001


def test_buckets_are_log_spaced_from_a_tenth_of_a_ms_past_an_hour() -> None:
    assert BOUNDS[0] == pytest.approx(0.0001) and BOUNDS[-1] > 3600
    assert all(b / a == pytest.approx(RATIO) for a, b in zip(BOUNDS[:-1], BOUNDS[1:], strict=True))
    assert bucket_of(0) == 0 and bucket_of(0.0001) == 0 and bucket_of(0.00011) == 1
    assert bucket_of(BOUNDS[10]) == 10 and bucket_of(BOUNDS[10] * 1.01) == 11
    assert bucket_of(86400) == OVERFLOW


def test_a_percentile_stays_in_the_bucket_its_rank_falls_in() -> None:
    histogram = {bucket_of(0.01): 90, bucket_of(1.0): 10}
    assert within_bucket(percentile(histogram, 0.5), 0.01)
    assert within_bucket(percentile(histogram, 0.95), 1.0)
    assert percentile({}, 0.5) is None
    assert percentile({OVERFLOW: 3}, 0.95) == BOUNDS[-1]  # beyond the last bound: reported as that bound
    assert 0 <= percentile({0: 4}, 0.5) <= BOUNDS[0]  # type: ignore[operator]
    assert merged([{1: 2, 3: 1}, {3: 4}]) == {1: 2, 3: 5}


def test_fields_name_task_kind_and_bucket_and_junk_is_ignored() -> None:
    assert parse_field(field_name("app.send:email", "w", 12).encode()) == ("app.send:email", "w", 12)
    for junk in (b"x", b"t\x00z\x001", b"t\x00r\x00-1", b"t\x00r\x00999"):
        assert parse_field(junk) is None


def test_a_job_is_ready_from_its_id_or_its_latest_due_time() -> None:
    made = time.time()
    job_id = new_job_id()
    assert ready_s(job_id, None) == pytest.approx(made, abs=0.01)
    later_ms = int(made * 1000) + 5000
    assert ready_s(job_id, later_ms) == later_ms / 1000  # retried or scheduled: ready when due
    assert ready_s(job_id, int(made * 1000) - 5000) == pytest.approx(made, abs=0.01)  # a stale due time
    assert ready_s("my-own-id", None) is None  # not a UUIDv7, never scheduled: unknown
    assert ready_s("f" * 32, later_ms) == later_ms / 1000


def hour(app: TaskForge, queue: str = "default") -> dict:
    _, timings = app.broker.inspection.task_timings([queue], minutes=60)
    return timings[queue]


def test_runs_are_timed_per_task_successes_and_failures_alike(app: TaskForge) -> None:
    slept: list[float] = []  # each run's own measure of its nap (app.drain runs them in this process)

    @app.task(name="t.nap", max_attempts=2, backoff=0)
    def nap(seconds, ok=True):
        start = time.perf_counter()
        time.sleep(seconds)
        slept.append(time.perf_counter() - start)
        if not ok:
            raise ValueError("no")

    @app.task(name="t.quick")
    def quick():
        return 1

    for _ in range(3):
        nap.delay(0.05)
    nap.delay(0.05, ok=False)  # runs twice: retried, then dead
    quick.delay()
    quick.with_options(job_id="my-own-id").delay()  # no known ready time: its run counts, its wait not
    app.drain()
    timings = hour(app)
    assert set(timings) == {"t.nap", "t.quick"}
    naps = timings["t.nap"]
    assert len(naps.run) == 60 and sum(sum(h.values()) for h in naps.run) == 5
    assert sum(sum(h.values()) for h in naps.wait) == 5
    run = merged(naps.run)
    # A 0.05 s nap never runs shorter. Under load (the server matrix runs niced beside the suite) a nap
    # can take twice as long: the median lies between the buckets of the shortest and the longest nap
    # the runs measured themselves, or one above (the worker's own time around the call).
    p50 = percentile(run, 0.5)
    assert p50 is not None and p50 >= BOUNDS[bucket_of(0.05) - 1], (run, slept)
    assert bucket_of(min(slept)) <= bucket_of(p50) <= bucket_of(max(slept)) + 1, (run, slept)
    assert percentile(merged(naps.wait), 0.95) < 5  # type: ignore[operator]
    quicks = timings["t.quick"]
    assert sum(sum(h.values()) for h in quicks.run) == 2 and sum(sum(h.values()) for h in quicks.wait) == 1
    _, none = app.broker.inspection.task_timings(["idle"], minutes=5)
    assert none == {"idle": {}}


def test_a_retry_waits_from_its_due_time_not_from_its_first_send(app: TaskForge) -> None:
    @app.task(name="t.flaky")
    def flaky():
        return 1

    handle = flaky.delay()
    [claim], _ = app.broker.claims.dequeue("default", LEASE)
    assert claim.scheduled_at is None
    # Retried in 1 s and claimed 1.1 s later: counted from its first send, the wait would be over 1 s;
    # from its due time, 0.1 s and whatever a loaded machine adds.
    app.broker.claims.fail("default", claim.id, claim.token, "ValueError: x", "", 1.0)
    time.sleep(1.1)
    [again], _ = app.broker.claims.dequeue("default", LEASE)
    assert again.id == handle.id and again.scheduled_at is not None
    seconds, micros = app.broker.client.time()
    now = seconds + micros / 1e6
    assert 0 <= now - ready_s(again.id, again.scheduled_at) < 0.6  # type: ignore[operator]
    app.broker.claims.tally.time_claim(again, 0.001)
    timings = hour(app)["t.flaky"]
    assert sum(sum(h.values()) for h in timings.wait) == 1
    assert percentile(merged(timings.wait), 0.5) < 0.6  # type: ignore[operator]


def test_timings_are_written_with_a_ttl_and_a_damaged_key_counts_as_nothing(app: TaskForge) -> None:
    app.broker.claims.tally.time_run("default", "t.x", time.time() - 0.5, 0.25)
    app.broker.claims.tally.flush_outcomes()
    seconds, _ = app.broker.client.time()
    key = QueueKeys("default").stats(int(seconds) // 60, "timings")
    if app.broker.client.exists(key):  # not when the minute turned during the test
        assert 0 < inspector(app).pttl(key) <= 2 * 3600 * 1000
        fields = app.broker.client.hgetall(key)
        assert fields == {
            field_name("t.x", "w", bucket_of(0.25)).encode(): b"1",
            b"t.x\x00r\x00%d" % bucket_of(0.25): b"1",
        }
    for minute in (int(seconds) // 60, int(seconds) // 60 - 1):
        app.broker.client.delete(QueueKeys("default").stats(minute, "timings"))
        app.broker.client.set(QueueKeys("default").stats(minute, "timings"), "garbage")
    assert hour(app) == {}
