"""Worker losses at the broker: a lost or crashed run uses a loss, not an attempt; a shutdown's cut-short run nothing.

``max_worker_losses`` (default 2) is the budget: the record keeps it only when
it is not the default, and the scripts read an absent one as 2. The worker
tests (``tests/worker/test_worker_losses.py``) kill real processes.
"""

from __future__ import annotations

import pytest

from taskforge import ConfigurationError, JobState, TaskForge
from taskforge.job import FailureKind

from .claiming import Q, claim_one


def crash(app: TaskForge) -> str:
    claim = claim_one(app)
    return app.broker.claims.fail("default", claim.id, claim.token, "WorkerCrashed: killed", "", 0, FailureKind.CRASHED)


def test_a_crashed_child_uses_a_loss_and_the_job_ends_worker_lost_once_they_are_spent(app: TaskForge) -> None:
    @app.task(max_attempts=1)
    def once() -> None:
        pass

    handle = once.delay()
    assert [crash(app), crash(app)] == ["retrying", "retrying"]
    info = handle.info()
    assert (info.attempts, info.losses, info.failure) == (0, 2, FailureKind.CRASHED)
    assert crash(app) == "dead"
    info = handle.info()
    assert (info.state, info.attempts, info.losses) == (JobState.DEAD, 0, 3)
    assert (info.failure, info.error_type) == (FailureKind.WORKER_LOST, "taskforge.errors.WorkerLost")
    assert info.error == (
        "WorkerLost: 3 runs lost their worker, over max_worker_losses=2 (the last: WorkerCrashed: killed)"
    )


def test_an_exception_still_uses_an_attempt(app: TaskForge) -> None:
    @app.task(max_attempts=1)
    def once() -> None:
        pass

    handle = once.delay()
    claim = claim_one(app)
    assert app.broker.claims.fail("default", claim.id, claim.token, "ValueError: x", "", 0) == "dead"
    assert (handle.info().attempts, handle.info().losses) == (1, 0)


def test_the_budget_is_stored_only_when_not_the_default_and_zero_ends_the_job_at_its_first_loss(
    app: TaskForge,
) -> None:
    @app.task(max_worker_losses=0)
    def fragile() -> None:
        pass

    @app.task
    def usual() -> None:
        pass

    kept, plain = fragile.delay(), usual.delay()
    assert app.broker.client.hget(Q.job(kept.id), "max_worker_losses") == b"0"
    assert app.broker.client.hget(Q.job(plain.id), "max_worker_losses") is None
    assert crash(app) == "dead"
    assert kept.info().error_type == "taskforge.errors.WorkerLost"


@pytest.mark.parametrize("value", [-1, 1.5, True, "2"])
def test_a_budget_that_is_not_a_count_is_refused(app: TaskForge, value: object) -> None:
    with pytest.raises(ConfigurationError, match="max_worker_losses"):
        app.task(name="t", max_worker_losses=value)  # type: ignore[call-overload]


def test_a_requeue_of_an_interrupted_run_records_it_and_one_unrun_does_not(app: TaskForge) -> None:
    @app.task
    def work() -> None:
        pass

    cut, unrun = work.delay(), work.delay()
    first, second = claim_one(app), claim_one(app)
    assert app.broker.claims.requeue("default", first.id, first.token, "Interrupted: stopped")
    assert app.broker.claims.requeue("default", second.id, second.token)
    info = cut.info()
    assert (info.state, info.attempts, info.interrupted, info.losses) == (JobState.PENDING, 0, 1, 0)
    assert (info.failure, info.error, info.error_type) == (
        FailureKind.INTERRUPTED,
        "Interrupted: stopped",
        "taskforge.errors.Interrupted",
    )
    assert (unrun.info().interrupted, unrun.info().error) == (0, None)


def test_a_job_sent_by_name_takes_the_budget_of_the_workers_task(app: TaskForge) -> None:
    handle = app.send("elsewhere.job")
    claim = claim_one(app)
    assert app.broker.claims.adopt("default", claim.id, claim.token, 1, None, 0)
    assert app.broker.client.hget(Q.job(handle.id), "max_worker_losses") == b"0"
    assert app.broker.claims.fail("default", claim.id, claim.token, "crash", "", 0, FailureKind.CRASHED) == "dead"
