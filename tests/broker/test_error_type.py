"""The ``error_type`` field the queue's scripts write, on memory:// and on real Redis alike.

Beside ``error`` and ``failure``, every script that records why a job failed
or was stopped writes ``error_type``: the class path of the error, one that
imports (``fail`` as its caller names it, else the taskforge error of the
kind; ``reclaim``, ``abandon``, ``abort``, an expiry and a corrupt claim
their own). The raw field is read here, not ``JobInfo``, which falls back
to the kind's class for records written before the field existed.
"""

from __future__ import annotations

import importlib

import pytest

from taskforge import JobState, TaskFailed, TaskForge, errors
from taskforge.broker.record import Field, job_info
from taskforge.job import FailureKind

from .claiming import LEASE, Q, claim_one, expire_leases


def stored(app: TaskForge, job_id: str) -> str | None:
    raw = app.broker.client.hget(Q.job(job_id), Field.ERROR_TYPE.value)
    return raw.decode() if raw is not None else None


def imports(path: str) -> type[BaseException]:
    module, _, name = path.rpartition(".")
    value = getattr(importlib.import_module(module), name)
    assert isinstance(value, type) and issubclass(value, BaseException)
    return value


@pytest.fixture
def work(app: TaskForge):
    @app.task(name="work", max_attempts=2, max_worker_losses=1)
    def work() -> None:
        pass

    return work


def test_fail_stores_the_class_path_its_caller_names(app: TaskForge, work) -> None:
    handle = work.delay()
    claim = claim_one(app)
    assert app.broker.claims.fail(
        "default", claim.id, claim.token, "KeyError: 'k'", "tb", 0, error_type="builtins.KeyError"
    )
    assert stored(app, handle.id) == "builtins.KeyError" and handle.info().error_type == "builtins.KeyError"
    claim = claim_one(app)
    app.broker.claims.fail(
        "default", claim.id, claim.token, "ValueError: v", "tb", 0, FailureKind.EXCEPTION, "builtins.ValueError"
    )
    assert stored(app, handle.id) == "builtins.ValueError"
    with pytest.raises(TaskFailed) as caught:
        handle.result(timeout=5)
    assert caught.value.error_type == "builtins.ValueError" and caught.value.error == "ValueError: v"


@pytest.mark.parametrize(
    ("kind", "cls"),
    [
        (FailureKind.RETRY, errors.Retry),
        (FailureKind.TIMEOUT, errors.HardTimeout),
        (FailureKind.CRASHED, errors.WorkerCrashed),
        (FailureKind.UNKNOWN_TASK, errors.UnknownTask),
        (FailureKind.SERIALIZATION, errors.SerializationError),
    ],
)
def test_fail_without_a_class_path_stores_the_taskforge_error_of_its_kind(
    app: TaskForge, work, kind: FailureKind, cls: type[BaseException]
) -> None:
    handle = work.delay()
    claim = claim_one(app)
    app.broker.claims.fail("default", claim.id, claim.token, "why", "", None, kind)
    assert imports(stored(app, handle.id) or "") is cls


def test_reclaim_stores_worker_lost_back_in_line_then_dead(app: TaskForge, work) -> None:
    handle = work.delay()
    claim_one(app)
    expire_leases(app)
    app.broker.claims.reclaim("default")
    assert (handle.info().state, stored(app, handle.id)) == (JobState.PENDING, "taskforge.errors.WorkerLost")
    claim_one(app)
    expire_leases(app)
    app.broker.claims.reclaim("default")
    assert (handle.info().state, stored(app, handle.id)) == (JobState.DEAD, "taskforge.errors.WorkerLost")
    assert imports("taskforge.errors.WorkerLost") is errors.WorkerLost


def test_reclaim_of_junk_attempts_stores_corrupt_job(app: TaskForge, work) -> None:
    handle = work.delay()
    claim_one(app)
    app.broker.client.hset(Q.job(handle.id), Field.ATTEMPTS.value, "many")
    expire_leases(app)
    app.broker.claims.reclaim("default")
    assert imports(stored(app, handle.id) or "") is errors.CorruptJob


def test_a_corrupt_claim_stores_corrupt_payload(app: TaskForge, work) -> None:
    handle = work.delay()
    app.broker.client.hset(Q.job(handle.id), Field.PAYLOAD.value, b"\xc1")
    assert app.broker.claims.dequeue("default", LEASE)[0] == []
    assert imports(stored(app, handle.id) or "") is errors.CorruptPayload


def test_abort_abandon_and_a_lost_abort_store_aborted(app: TaskForge, work) -> None:
    unstarted, stopped, lost = work.delay(), work.delay(), work.delay()
    assert unstarted.abort()
    first, _ = claim_one(app), claim_one(app)
    assert stopped.abort() and lost.abort()
    assert app.broker.claims.abandon("default", first.id, first.token)
    expire_leases(app)
    app.broker.claims.reclaim("default")
    for handle in (unstarted, stopped, lost):
        assert imports(stored(app, handle.id) or "") is errors.Aborted
        with pytest.raises(TaskFailed) as caught:
            handle.result(timeout=5)
        assert caught.value.error_type == "taskforge.errors.Aborted"


def test_an_expired_job_stores_expired(app: TaskForge, work) -> None:
    handle = work.with_options(expires=3600).delay()
    app.broker.client.hset(Q.job(handle.id), Field.EXPIRES.value, 1)  # its hour passed long ago
    assert app.broker.claims.dequeue("default", LEASE)[0] == []
    assert handle.info().state is JobState.CANCELLED
    assert imports(stored(app, handle.id) or "") is errors.Expired


def test_a_cancel_and_a_success_store_no_error_type(app: TaskForge, work) -> None:
    cancelled, done = work.delay(), work.delay()
    assert cancelled.cancel()
    claim = claim_one(app)
    assert app.broker.claims.succeed("default", claim.id, claim.token, b"\xc0")
    for handle in (cancelled, done):
        assert stored(app, handle.id) is None and handle.info().error_type is None


def test_a_record_from_before_the_field_reads_the_class_of_its_kind() -> None:
    old = {Field.STATE.key: b"dead", Field.FAILURE.key: b"worker_lost", Field.ERROR.key: b"WorkerLost: gone"}
    assert job_info("j", "q", old).error_type == "taskforge.errors.WorkerLost"
    raised = {Field.STATE.key: b"dead", Field.FAILURE.key: b"exception", Field.ERROR.key: b"ValueError: x"}
    assert job_info("j", "q", raised).error_type is None  # the class is not known: not guessed


def test_every_kind_names_a_class_that_imports() -> None:
    for kind in FailureKind:
        imports(errors.error_type_of_kind(kind.value))
