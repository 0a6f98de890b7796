"""The queue contract, on memory:// and on real Redis alike."""

from __future__ import annotations

import random
import threading
import time
from datetime import datetime, timedelta, timezone

import pytest

from taskforge import JobNotFound, JobState, Priority, QueueFull, TaskFailed, TaskForge
from taskforge.broker.keys import QueueKeys
from tests.conftest import inspector

LEASE = 30_000


def claim_one(app: TaskForge, queue: str = "default", lease_ms: int = LEASE):
    claims, wait = app.broker.claims.dequeue(queue, lease_ms)
    assert len(claims) <= 1
    return claims[0] if claims else None


def test_round_trip_and_info(app: TaskForge) -> None:
    @app.task(priority="high", max_attempts=5, timeout=7)
    def send_email(to, subject="hello"):
        return to

    handle = send_email.delay("a@example.com", subject="hi")
    assert handle.status() is JobState.PENDING
    claim = claim_one(app)
    assert (claim.id, claim.task, claim.args, claim.kwargs) == (
        handle.id,
        send_email.name,
        ("a@example.com",),
        {"subject": "hi"},
    )
    assert (claim.attempts, claim.max_attempts, claim.timeout, claim.priority) == (1, 5, 7.0, 2)
    assert handle.status() is JobState.RUNNING
    assert app.broker.claims.succeed("default", claim.id, claim.token, b"\xa2ok")
    info = handle.info()
    assert info.state is JobState.SUCCEEDED and info.result == "ok"
    assert info.priority is Priority.HIGH and info.attempts == 1 and info.max_attempts == 5
    assert info.created_at <= info.started_at <= info.finished_at
    assert handle.result(timeout=1) == "ok"


def test_strict_priority_then_fifo_over_1000_jobs(app: TaskForge) -> None:
    @app.task
    def work(n):
        return n

    rng = random.Random(7)
    expected: dict[int, list[str]] = {p: [] for p in range(4)}
    for i in range(1000):
        priority = rng.choice(list(Priority))
        handle = work.with_options(priority=priority).delay(i)
        expected[int(priority)].append(handle.id)
    order = [claim.id for claim in iter(lambda: claim_one(app), None)]
    assert order == expected[3] + expected[2] + expected[1] + expected[0]


def test_delay_many_one_call_all_handles_in_order(app: TaskForge) -> None:
    @app.task
    def add(a, b=0):
        return a + b

    handles = add.delay_many([(1, 2), {"a": 3, "b": 4}, (5,)])
    claims = [claim_one(app) for _ in range(3)]
    assert [c.id for c in claims] == [h.id for h in handles]
    assert [(c.args, c.kwargs) for c in claims] == [((1, 2), {}), ((), {"a": 3, "b": 4}), ((5,), {})]


def test_scheduled_job_waits_for_its_time(app: TaskForge) -> None:
    @app.task
    def later():
        pass

    # 1.5 s: the server matrix runs this niced beside the suite, where 0.3 s once passed between the send
    # and the claim; the test then sleeps only as long as the claim says is left.
    handle = later.apply_in(1.5)
    assert handle.status() is JobState.SCHEDULED
    claims, wait = app.broker.claims.dequeue("default", LEASE)
    assert claims == [] and 0 < wait <= 1.5
    time.sleep(wait + 0.05)
    assert claim_one(app).id == handle.id


def test_apply_at_past_and_naive_times(app: TaskForge) -> None:
    @app.task
    def job(when=None):
        return when

    past = job.apply_at(datetime(2001, 1, 1), when="kw named when is fine")
    assert past.status() is JobState.PENDING
    future = job.apply_at(datetime.now(timezone.utc) + timedelta(hours=1))
    assert future.status() is JobState.SCHEDULED
    # Naive means UTC. (datetime.utcnow() is deprecated since Python 3.12.)
    naive = job.apply_at(datetime.now(timezone.utc).replace(tzinfo=None) + timedelta(hours=1))
    delta = naive.info().scheduled_at - future.info().scheduled_at
    assert abs(delta.total_seconds()) < 5
    assert claim_one(app).kwargs == {"when": "kw named when is fine"}


def test_failure_retries_then_dead(app: TaskForge) -> None:
    @app.task(max_attempts=2)
    def flaky():
        pass

    handle = flaky.delay()
    first = claim_one(app)
    assert app.broker.claims.fail("default", first.id, first.token, "ValueError: boom", "tb", 0.05) == "retrying"
    assert handle.status() is JobState.RETRYING
    time.sleep(0.1)
    second = claim_one(app)
    assert second.id == handle.id and second.attempts == 2
    assert app.broker.claims.fail("default", second.id, second.token, "ValueError: boom", "tb2", 0.05) == "dead"
    info = handle.info()
    assert info.state is JobState.DEAD and info.error == "ValueError: boom" and info.traceback == "tb2"
    assert app.broker.inspection.counts("default")["dead"] == 1
    with pytest.raises(TaskFailed) as failed:
        handle.result(timeout=1)
    assert failed.value.error == "ValueError: boom"
    assert app.broker.cleanup.retry_dead("default", [handle.id]) == [handle.id]
    again = claim_one(app)
    assert again.id == handle.id and again.attempts == 1


def test_reclaim_counts_a_loss_and_fences_the_old_owner(app: TaskForge) -> None:
    @app.task(max_attempts=2, max_worker_losses=1)
    def slow():
        pass

    handle = slow.delay()
    old = claim_one(app, lease_ms=50)
    time.sleep(0.1)
    assert app.broker.claims.reclaim("default") == ([handle.id], [], 0)
    assert handle.status() is JobState.PENDING
    new = claim_one(app, lease_ms=50)
    assert new.attempts == 1 and new.token != old.token  # a lost worker uses no attempt: the run is a loss
    assert handle.info().losses == 1
    assert not app.broker.claims.succeed("default", old.id, old.token, b"\xc0")
    assert app.broker.claims.fail("default", old.id, old.token, "late", "", 0) == "fenced"
    assert app.broker.claims.extend("default", LEASE, [(old.id, old.token)]) == ([old.id], [])
    time.sleep(0.1)
    assert app.broker.claims.reclaim("default") == ([], [handle.id], 0)
    info = handle.info()
    assert info.state is JobState.DEAD and "WorkerLost" in info.error and "max_worker_losses=1" in info.error
    assert (info.attempts, info.losses) == (0, 2)


def test_an_aborted_job_whose_worker_died_ends_cancelled_not_rerun(app: TaskForge) -> None:
    @app.task(max_attempts=3)
    def slow():
        pass

    handle = slow.delay()
    claim_one(app, lease_ms=50)
    assert handle.abort() is True  # flagged: its supervisor would stop it at the next renewal
    time.sleep(0.1)  # ...but the worker died first
    assert app.broker.claims.reclaim("default") == ([], [], 0)
    info = handle.info()
    assert info.state is JobState.CANCELLED and "Aborted" in info.error
    assert claim_one(app) is None and app.broker.inspection.counts("default")["running"] == 0
    # A dead job retried later starts without an old abort request hanging over it.
    other = slow.delay()
    first = claim_one(app)
    app.broker.client.hset(QueueKeys("default").job(other.id), "abort", "1")
    assert app.broker.claims.fail("default", first.id, first.token, "boom", "", None) == "dead"
    assert app.broker.cleanup.retry_dead("default", [other.id]) == [other.id]
    again = claim_one(app)
    assert app.broker.claims.extend("default", LEASE, [(again.id, again.token)]) == ([], [])


def test_extend_keeps_a_slow_job_claimed(app: TaskForge) -> None:
    @app.task
    def slow():
        pass

    # Four renewals 0.3 s apart outlast the first 0.5 s lease; each leaves 0.2 s for a stalled test
    # process (the server matrix runs this niced beside the suite).
    slow.delay()
    claim = claim_one(app, lease_ms=500)
    for _ in range(4):
        time.sleep(0.3)
        assert app.broker.claims.extend("default", 500, [(claim.id, claim.token)]) == ([], [])
        assert app.broker.claims.reclaim("default") == ([], [], 0)
    assert app.broker.claims.succeed("default", claim.id, claim.token, b"\xc0")


def test_requeue_refunds_the_attempt_and_keeps_the_place(app: TaskForge) -> None:
    @app.task
    def job(n):
        pass

    first, second = job.delay(1), job.delay(2)
    claim = claim_one(app)
    assert claim.id == first.id
    assert app.broker.claims.requeue("default", claim.id, claim.token)
    again = claim_one(app)
    assert again.id == first.id and again.attempts == 1
    assert claim_one(app).id == second.id


def test_cancel(app: TaskForge) -> None:
    @app.task
    def job():
        pass

    pending, scheduled, running = job.delay(), job.apply_in(60), job.delay()
    assert pending.cancel() and scheduled.cancel()
    assert pending.status() is JobState.CANCELLED and scheduled.status() is JobState.CANCELLED
    claim = claim_one(app)
    assert claim.id == running.id
    assert not running.cancel()
    assert app.broker.claims.succeed("default", claim.id, claim.token, b"\xc0")
    assert not running.cancel()
    assert claim_one(app) is None
    with pytest.raises(TaskFailed):
        pending.result(timeout=1)
    with pytest.raises(JobNotFound):
        app.job("no-such-id").cancel()


def test_result_blocks_until_done_and_times_out(app: TaskForge) -> None:
    @app.task
    def job():
        pass

    handle = job.delay()
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        handle.result(timeout=0.2)
    assert 0.2 <= time.monotonic() - started < 1.5
    claim = claim_one(app)

    def finish() -> None:
        time.sleep(0.3)
        app.broker.claims.succeed("default", claim.id, claim.token, b"\x2a")

    threading.Thread(target=finish).start()
    assert handle.result(timeout=5) == 42
    assert handle.result(timeout=5) == 42  # waiting again does not consume anything


def test_max_size_counts_every_unfinished_job(app: TaskForge) -> None:
    small = TaskForge("small", broker=app.url, max_size=3)
    small._broker = app.broker  # memory:// is private per app; share it

    @small.task
    def job():
        pass

    job.delay()
    job.apply_in(60)
    claim_one(small)
    job.delay()
    with pytest.raises(QueueFull, match="max_size is 3"):
        job.delay()
    with pytest.raises(QueueFull):
        job.delay_many([(), ()])
    assert sum(small.broker.inspection.counts("default").values()) == 3


def test_retention_applies_to_finished_jobs_only(app: TaskForge) -> None:
    @app.task
    def job():
        pass

    handle = job.delay()
    key = QueueKeys("default").job(handle.id)
    assert inspector(app).pttl(key) == -1
    claim = claim_one(app)
    app.broker.claims.succeed("default", claim.id, claim.token, b"\xc0")
    assert 0 < inspector(app).pttl(key) <= 86_400_000


@pytest.mark.parametrize("where", ["memory", "redis"])
def test_script_flush_between_calls(where: str, request: pytest.FixtureRequest) -> None:
    # SCRIPT FLUSH empties the whole server: on real Redis, a server of the test's own.
    app = TaskForge("tests", broker="memory://" if where == "memory" else request.getfixturevalue("own_redis_url"))

    @app.task
    def job():
        pass

    handle = job.delay()
    app.broker.client.script_flush()
    claim = claim_one(app)
    app.broker.client.script_flush()
    assert app.broker.claims.succeed("default", claim.id, claim.token, b"\xc0")
    app.broker.client.script_flush()
    assert handle.result(timeout=1) is None


def test_corrupt_body_goes_to_dead_letters(app: TaskForge) -> None:
    @app.task
    def job():
        pass

    bad, good = job.delay(), job.delay()
    app.broker.client.hset(QueueKeys("default").job(bad.id), "payload", b"\xc1 not msgpack")
    claims, wait = app.broker.claims.dequeue("default", LEASE)
    assert claims == [] and wait == 0
    info = bad.info()
    assert info.state is JobState.DEAD and info.error.startswith("CorruptPayload")
    assert claim_one(app).id == good.id


def test_id_without_a_body_is_dropped(app: TaskForge) -> None:
    @app.task
    def job():
        pass

    ghost, real = job.delay(), job.delay()
    app.broker.client.delete(QueueKeys("default").job(ghost.id))
    assert claim_one(app).id == real.id
    assert app.broker.inspection.counts("default")["pending"] == 0


def test_purge_and_clear(app: TaskForge) -> None:
    @app.task
    def job():
        pass

    for _ in range(1200):
        job.delay()
    job.apply_in(60)
    assert app.broker.cleanup.purge("default", "pending") == 1200
    assert app.broker.cleanup.purge("default", "scheduled") == 1
    empty = {"pending": 0, "scheduled": 0, "running": 0, "dead": 0, "deferred": 0}
    assert app.broker.inspection.counts("default") == empty
    job.delay()
    assert app.broker.cleanup.clear("default") >= 1
    assert inspector(app).keys("taskforge:{default}:*") == []


def test_app_job_finds_the_queue(app: TaskForge) -> None:
    @app.task(queue="mail")
    def send():
        pass

    handle = send.delay()
    assert app.job(handle.id).status() is JobState.PENDING
    assert app.job(handle.id).queue == "mail"


def test_retry_dead_clears_the_done_list(app: TaskForge) -> None:
    @app.task(max_attempts=1)
    def job():
        pass

    handle = job.delay()
    claim = claim_one(app)
    assert app.broker.jobs.await_state("default", handle.id) == "running"
    app.broker.claims.fail("default", claim.id, claim.token, "boom", "", None)
    assert app.broker.client.exists(QueueKeys("default").done(handle.id))
    app.broker.cleanup.retry_dead("default", [handle.id])
    assert not app.broker.client.exists(QueueKeys("default").done(handle.id))
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        handle.result(timeout=0.3)
    assert time.monotonic() - started >= 0.3


def test_peek_reports_each_queues_best_head(app: TaskForge) -> None:
    from taskforge.broker.queue import priority_of_score

    @app.task(queue="bulk", priority="low")
    def bulk():
        pass

    @app.task(queue="urgent", priority="critical")
    def urgent():
        pass

    bulk.delay()
    urgent.apply_in(0.05)
    time.sleep(0.1)
    (bulk_head, _), (urgent_head, _), (empty, wait) = app.broker.claims.peek(["bulk", "urgent", "none"])
    assert priority_of_score(bulk_head) == 0 and priority_of_score(urgent_head) == 3
    assert empty is None and wait is None


def test_transient_replies_become_broker_unavailable() -> None:
    import redis as redis_py

    from taskforge import BrokerUnavailable
    from taskforge.broker.connection import broker_errors

    for reply in (
        "BUSY Redis is busy running a script",
        "READONLY You can't write against a read only replica.",
        "LOADING Redis is loading the dataset in memory",
    ):
        with pytest.raises(BrokerUnavailable, match="retry later|cannot reach"):
            with broker_errors("redis://u:secret@h:1/0"):
                raise redis_py.ResponseError(reply)
    with pytest.raises(redis_py.ResponseError):
        with broker_errors("redis://h:1/0"):
            raise redis_py.ResponseError("WRONGTYPE Operation against a key holding the wrong kind of value")


def test_a_timeout_field_of_zero_or_less_means_no_timeout(app: TaskForge) -> None:
    @app.task(timeout=5)
    def job():
        pass

    handles = [job.delay() for _ in range(3)]
    for handle, junk in zip(handles, (b"-5", b"0", b"7000"), strict=True):
        app.broker.client.hset(QueueKeys("default").job(handle.id), "timeout", junk)
    timeouts = [claim_one(app).timeout for _ in handles]
    assert timeouts == [None, None, 7.0]
