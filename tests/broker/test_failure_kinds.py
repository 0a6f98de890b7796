"""Failure kinds written by the broker's scripts, on memory:// and on real Redis alike.

Each way a job can fail or be stopped that the queue itself records (``fail``
with the kind its caller names, ``reclaim``, ``abandon``, ``abort``, the
dead-lettering of a corrupt claim) stores its ``FailureKind`` in the record's
``failure`` field; ``JobInfo``, ``TaskFailed`` and ``to_dict`` read it back.
"""

from __future__ import annotations

import pytest

from taskforge import JobState, TaskFailed, TaskForge
from taskforge.broker.record import Field, job_info
from taskforge.handle import JobHandle
from taskforge.job import FailureKind

from .claiming import LEASE, Q, claim_one, expire_leases


@pytest.fixture
def work(app: TaskForge):
    @app.task(name="work", max_attempts=2, max_worker_losses=1)
    def work() -> None:
        pass

    return work


def test_fail_stores_the_kind_its_caller_names_retrying_then_dead(app: TaskForge, work) -> None:
    handle = work.delay()
    claim = claim_one(app)
    assert (
        app.broker.claims.fail("default", claim.id, claim.token, "Retry: later", "", 0, FailureKind.RETRY) == "retrying"
    )
    info = handle.info()
    assert (info.state, info.failure, info.error) == (JobState.RETRYING, FailureKind.RETRY, "Retry: later")
    claim = claim_one(app)
    outcome = app.broker.claims.fail("default", claim.id, claim.token, "TimeoutError: slow", "", 0, FailureKind.TIMEOUT)
    assert outcome == "dead"
    info = handle.info()
    assert (info.state, info.failure, info.error) == (JobState.DEAD, FailureKind.TIMEOUT, "TimeoutError: slow")
    with pytest.raises(TaskFailed) as caught:
        handle.result(timeout=5)
    assert caught.value.kind is FailureKind.TIMEOUT and caught.value.error == "TimeoutError: slow"


def test_fail_without_a_kind_records_an_exception(app: TaskForge, work) -> None:
    handle = work.delay()
    claim = claim_one(app)
    assert app.broker.claims.fail("default", claim.id, claim.token, "ValueError: no", "tb", None) == "dead"
    assert handle.info().failure is FailureKind.EXCEPTION


def test_a_fenced_fail_writes_no_kind(app: TaskForge, work) -> None:
    handle = work.delay()
    claim = claim_one(app)
    assert app.broker.claims.fail("default", claim.id, "not-the-token", "late", "", 0, FailureKind.CRASHED) == "fenced"
    assert handle.info().failure is None


def test_a_job_that_never_failed_has_no_failure(app: TaskForge, work) -> None:
    handle = work.delay()
    assert handle.info().failure is None
    claim = claim_one(app)
    assert app.broker.claims.succeed("default", claim.id, claim.token, b"\xc0")
    info = handle.info()
    assert info.failure is None and info.to_dict()["failure"] is None


def test_reclaim_records_worker_lost_back_in_line_then_dead(app: TaskForge, work) -> None:
    handle = work.delay()
    claim_one(app)
    expire_leases(app)
    assert app.broker.claims.reclaim("default") == ([handle.id], [], 0)
    info = handle.info()
    assert (info.state, info.failure) == (JobState.PENDING, FailureKind.WORKER_LOST)
    claim_one(app)
    expire_leases(app)
    assert app.broker.claims.reclaim("default") == ([], [handle.id], 0)
    info = handle.info()
    assert (info.state, info.failure) == (JobState.DEAD, FailureKind.WORKER_LOST)
    assert info.error is not None and info.error.startswith("WorkerLost: ")
    assert info.to_dict()["failure"] == "worker_lost"


def test_reclaim_of_junk_attempts_records_corrupt(app: TaskForge, work) -> None:
    handle = work.delay()
    claim_one(app)
    app.broker.client.hset(Q.job(handle.id), Field.ATTEMPTS.value, "many")
    expire_leases(app)
    assert app.broker.claims.reclaim("default") == ([], [handle.id], 0)
    info = handle.info()
    assert (info.state, info.failure) == (JobState.DEAD, FailureKind.CORRUPT)
    assert info.error is not None and info.error.startswith("CorruptJob: ")


def test_a_corrupt_claim_is_dead_lettered_as_corrupt(app: TaskForge, work) -> None:
    handle = work.delay()
    app.broker.client.hset(Q.job(handle.id), Field.PAYLOAD.value, b"\xc1")
    claims, _ = app.broker.claims.dequeue("default", LEASE)
    assert claims == []
    info = handle.info()
    assert (info.state, info.failure) == (JobState.DEAD, FailureKind.CORRUPT)
    assert info.error is not None and info.error.startswith("CorruptPayload: ")


def test_abandon_and_a_reclaim_of_an_abort_record_aborted(app: TaskForge, work) -> None:
    stopped, lost = work.delay(), work.delay()
    first, _ = claim_one(app), claim_one(app)
    assert stopped.abort() and lost.abort()
    assert app.broker.claims.abandon("default", first.id, first.token)
    expire_leases(app)
    assert app.broker.claims.reclaim("default") == ([], [], 0)
    for handle in (stopped, lost):
        info = handle.info()
        assert (info.state, info.failure) == (JobState.CANCELLED, FailureKind.ABORTED)
        assert info.error is not None and info.error.startswith("Aborted: ")
        with pytest.raises(TaskFailed) as caught:
            handle.result(timeout=5)
        assert caught.value.kind is FailureKind.ABORTED


def test_abort_of_an_unstarted_job_records_aborted_and_cancel_records_nothing(app: TaskForge, work) -> None:
    aborted, cancelled = work.delay(), work.delay()
    assert aborted.abort() and cancelled.cancel()
    info = aborted.info()
    assert (info.state, info.failure, info.error) == (JobState.CANCELLED, FailureKind.ABORTED, None)
    info = cancelled.info()
    assert (info.state, info.failure) == (JobState.CANCELLED, None)
    with pytest.raises(TaskFailed) as caught:
        cancelled.result(timeout=5)
    assert caught.value.kind is None


def test_retry_dead_and_requeue_keep_the_latest_failure_beside_its_error(app: TaskForge, work) -> None:
    handle = work.delay()
    claim = claim_one(app)
    app.broker.claims.fail("default", claim.id, claim.token, "UnknownTask: no", "", None, FailureKind.UNKNOWN_TASK)
    assert app.broker.cleanup.retry_dead("default", [handle.id]) == [handle.id]
    info = handle.info()
    assert (info.state, info.failure, info.error) == (JobState.PENDING, FailureKind.UNKNOWN_TASK, "UnknownTask: no")
    claim = claim_one(app)
    assert app.broker.claims.requeue("default", claim.id, claim.token)
    assert handle.info().failure is FailureKind.UNKNOWN_TASK
    claim = claim_one(app)
    assert app.broker.claims.succeed("default", claim.id, claim.token, b"\xc0")
    info = handle.info()
    assert (info.state, info.failure) == (JobState.SUCCEEDED, FailureKind.UNKNOWN_TASK)


@pytest.mark.parametrize("raw", [b"", b"on fire", b"\xff\xfe", b"TIMEOUT", b"timeout ", b"x" * 10_000, b"0"])
def test_a_junk_failure_field_decodes_to_none(raw: bytes) -> None:
    info = job_info("j", "q", {Field.STATE.key: b"dead", Field.FAILURE.key: raw})
    assert info.failure is None and info.to_dict()["failure"] is None


def test_a_junk_failure_field_in_redis_reads_as_none_everywhere(app: TaskForge, work) -> None:
    handle = work.delay()
    claim = claim_one(app)
    app.broker.claims.fail("default", claim.id, claim.token, "ValueError: x", "", None, FailureKind.EXCEPTION)
    app.broker.client.hset(Q.job(handle.id), Field.FAILURE.value, b"\xc1\xff not a kind")
    assert JobHandle(app, handle.id).info().failure is None
    with pytest.raises(TaskFailed) as caught:
        handle.result(timeout=5)
    assert caught.value.kind is None and caught.value.error == "ValueError: x"


def test_every_kind_round_trips_through_the_record() -> None:
    for kind in FailureKind:
        info = job_info("j", "q", {Field.FAILURE.key: kind.value.encode()})
        assert info.failure is kind and info.to_dict()["failure"] == kind.value == str(kind)
