"""The two scripts behind this package's detours, on both brokers: ``pass`` and ``expire_owner``."""

from __future__ import annotations

from taskforge import JobState, TaskForge
from taskforge.broker.keys import QueueKeys


def claim(app: TaskForge, token: str) -> str:
    [claimed], _ = app.broker.claims.dequeue("default", 60_000, token=token)
    return claimed.id


def test_a_passed_job_comes_back_later_unrun_with_its_attempt_refunded(app: TaskForge) -> None:
    handle = app.send("elsewhere.task", 1)
    broker = app.broker
    delays = []
    for n in range(7):
        token = f"tok{n:013d}"
        job_id = claim(app, token)
        assert job_id == handle.id and handle.info().attempts == 1
        delays.append(broker.claims.pass_job("default", job_id, token, 500, 5_000))
        info = handle.info()
        assert info.state is JobState.SCHEDULED and info.attempts == 0
        assert broker.claims.dequeue("default", 60_000)[0] == []  # not claimable during the delay
        assert broker.claims.fast_forward("default", 10) == 1
    assert delays == [500, 1000, 2000, 4000, 5000, 5000, 5000]
    # A claim that is no longer ours is fenced: nothing changes.
    job_id = claim(app, "tok-live")
    assert broker.claims.pass_job("default", job_id, "tok-stale", 500, 5_000) == -1
    assert handle.info().state is JobState.RUNNING


def test_expire_owner_expires_only_the_claims_carrying_that_prefix(app: TaskForge) -> None:
    dead = app.send("any.task", "dead")
    live = app.send("any.task", "live")
    assert claim(app, "aaaaaaaaaaaa.0000000000000001") == dead.id
    assert claim(app, "bbbbbbbbbbbb.0000000000000002") == live.id
    broker = app.broker
    assert broker.claims.expire_owner("default", "cccccccccccc.") == 0
    assert broker.claims.expire_owner("default", "") == 0  # no prefix: never every claim
    assert broker.claims.expire_owner("default", "aaaaaaaaaaaa.") == 1
    back, buried, dropped = broker.claims.reclaim("default")
    assert (back, buried, dropped) == ([dead.id], [], 0)
    info = dead.info()
    assert info.state is JobState.PENDING and (info.attempts, info.losses) == (0, 1)  # a loss, not an attempt
    assert live.info().state is JobState.RUNNING
    # The dead worker's late write is fenced: its token was cleared by the reclaim.
    assert broker.claims.succeed("default", dead.id, "aaaaaaaaaaaa.0000000000000001", b"\xc0") is False
    assert app.broker.client.hget(QueueKeys("default").job(dead.id), "token") in (b"", None)
