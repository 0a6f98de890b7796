"""A plain job's record holds only what the key and the code do not already know, and reads as a full one.

A new record leaves out its id (the key names it), attempts 0, an empty
token, and a default priority or max_attempts; an absent field reads as
that value everywhere (the claim, the retry decision, ``JobInfo``). A Redis
upgraded in place is full of records an earlier version wrote with every
field: both shapes must read alike.
"""

from __future__ import annotations

from taskforge import JobState, TaskForge
from taskforge.broker.record import DEFAULT_MAX_ATTEMPTS, Field
from taskforge.job import Priority

from .claiming import Q, claim_one

LEFT_OUT = {Field.ID.key, Field.ATTEMPTS.key, Field.TOKEN.key, Field.PRIORITY.key, Field.MAX_ATTEMPTS.key}


def as_written_before(app: TaskForge, job_id: str) -> None:
    """Give a record the fields an earlier version wrote at enqueue, defaults and all."""
    app.broker.client.hset(
        Q.job(job_id),
        mapping={"id": job_id, "attempts": 0, "token": "", "priority": 1, "max_attempts": DEFAULT_MAX_ATTEMPTS},
    )


def test_a_plain_record_stores_no_default_nor_its_id(app: TaskForge) -> None:
    @app.task
    def plain() -> None:
        pass

    @app.task(priority="high", max_attempts=5)
    def chosen() -> None:
        pass

    record = app.broker.client.hgetall(Q.job(plain.delay().id))
    assert not LEFT_OUT & set(record)
    assert set(record) == {b"payload", b"created_at", b"task", b"state", b"seq"}
    record = app.broker.client.hgetall(Q.job(chosen.delay().id))
    assert (record[Field.PRIORITY.key], record[Field.MAX_ATTEMPTS.key]) == (b"2", b"5")


def test_both_shapes_read_alike_in_job_info_and_in_the_claim(app: TaskForge) -> None:
    @app.task
    def plain() -> None:
        pass

    new, old = plain.delay(), plain.delay()
    as_written_before(app, old.id)
    infos = [new.info(), old.info()]
    for info in infos:
        assert (info.priority, info.max_attempts, info.attempts) == (Priority.NORMAL, DEFAULT_MAX_ATTEMPTS, 0)
        assert info.state is JobState.PENDING
    assert infos[0].to_dict() | {"id": "", "created_at": ""} == infos[1].to_dict() | {"id": "", "created_at": ""}
    claims = [claim_one(app), claim_one(app)]
    assert [c.id for c in claims] == [new.id, old.id]  # one line, whatever the shape: FIFO holds
    for claim in claims:
        assert (claim.priority, claim.max_attempts, claim.attempts) == (1, DEFAULT_MAX_ATTEMPTS, 1)


def test_an_absent_max_attempts_retries_as_the_default_does(app: TaskForge) -> None:
    @app.task
    def flaky() -> None:
        pass

    handle = flaky.delay()
    outcomes = []
    for _ in range(DEFAULT_MAX_ATTEMPTS):
        app.broker.client.zadd(Q.pending, {handle.id: 0})  # a retry is due at once
        app.broker.client.zrem(Q.scheduled, handle.id)
        app.broker.client.hset(Q.job(handle.id), "state", "pending")
        claim = claim_one(app)
        outcomes.append(app.broker.claims.fail("default", claim.id, claim.token, "ValueError: x", "", 0))
    assert outcomes == ["retrying"] * (DEFAULT_MAX_ATTEMPTS - 1) + ["dead"]
    assert handle.info().attempts == DEFAULT_MAX_ATTEMPTS


def test_a_finished_record_keeps_no_claim_token_place_in_line_or_unstarted_mark(app: TaskForge) -> None:
    @app.task
    def plain() -> None:
        pass

    done, failed = plain.delay(), plain.delay()
    claim = claim_one(app)
    app.broker.client.hset(Q.job(claim.id), "unstarted", "1")  # as a batch's later job carries it
    assert app.broker.claims.succeed("default", claim.id, claim.token, b"\xc0")
    claim = claim_one(app)
    assert app.broker.claims.fail("default", claim.id, claim.token, "ValueError: x", "", None) == "dead"
    for handle in (done, failed):
        record = app.broker.client.hgetall(Q.job(handle.id))
        assert not {Field.TOKEN.key, Field.SEQ.key, Field.UNSTARTED.key} & set(record), handle.id
        assert record[Field.OUTCOME_TOKEN.key] and record[Field.FINISHED_AT.key]
    assert done.result(timeout=1) is None and failed.info().state is JobState.DEAD
    assert app.job(failed.id).retry() and claim_one(app).id == failed.id  # a new place in line, a new claim
