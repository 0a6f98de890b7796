"""A claim of several jobs charges each its attempt; a reclaim counts a worker loss only for those said to have started.

docs/worker-model.md, "Process model": a worker that dies returns every job it held, and a job
it never started is not charged an attempt. The first job of a claim starts
at once; the others are marked unstarted until a settle says they started
(a worker's lane does, within about 5 ms of each start). A run lost with its
worker uses no attempt either, but counts a loss (``max_worker_losses``): a
job never started counts none. Checked here at the
broker, on memory:// and a real Redis alike; ``tests/worker/test_batch_promises.py``
kills real workers.
"""

from __future__ import annotations

import time

from taskforge import JobHandle, JobState, TaskForge

TINY_LEASE_MS = 1
Q = "default"


def expire(app: TaskForge) -> tuple[list[str], list[str]]:
    """Let the tiny leases run out, then reclaim as any worker would: (back, buried)."""
    time.sleep(0.05)
    back, buried, dropped = app.broker.claims.reclaim(Q)
    assert dropped == 0
    return sorted(back), sorted(buried)


def charged(handle: JobHandle) -> tuple[int, int]:
    """(attempts, losses) of a job's record."""
    info = handle.info()
    return info.attempts, info.losses


def test_a_reclaim_refunds_only_the_jobs_of_a_claim_never_said_to_have_started(app: TaskForge) -> None:
    @app.task(max_attempts=1)
    def job(n):
        return n

    handles = [job.delay(n) for n in range(4)]
    claims, _ = app.broker.claims.dequeue(Q, TINY_LEASE_MS, 4)
    assert [(c.id, c.attempts) for c in claims] == [(h.id, 1) for h in handles]  # each starts its first attempt
    said, _ = app.broker.claims.settle(Q, [], started=[(claims[1].id, claims[1].token)])
    assert said == []  # a start mark is no outcome
    back, buried = expire(app)
    # The first started with its claim and the second was said to: both lost their run with the worker,
    # a loss each and not their one attempt; the others never started and count nothing.
    assert buried == [] and back == sorted(h.id for h in handles)
    assert [charged(h) for h in handles] == [(0, 1), (0, 1), (0, 0), (0, 0)]
    again, _ = app.broker.claims.dequeue(Q, 60_000, 4)
    assert [(c.id, c.attempts) for c in again] == [(h.id, 1) for h in handles]  # in their place, as first runs
    for claim in again:
        assert app.broker.claims.succeed(Q, claim.id, claim.token, b"\xc0")
    assert [h.status() for h in handles] == [JobState.SUCCEEDED] * 4


def test_a_start_mark_under_a_claim_no_longer_held_changes_nothing(app: TaskForge) -> None:
    @app.task(max_attempts=3)
    def job(n):
        return n

    first, second = job.delay(1), job.delay(2)
    old, _ = app.broker.claims.dequeue(Q, TINY_LEASE_MS, 2)
    assert expire(app) == (sorted([first.id, second.id]), [])
    assert [charged(first), charged(second)] == [(0, 1), (0, 0)]
    new, _ = app.broker.claims.dequeue(Q, TINY_LEASE_MS, 2)
    assert [c.id for c in new] == [first.id, second.id]
    app.broker.claims.settle(Q, [], started=[(old[1].id, old[1].token)])  # a late word from the old claim: fenced
    expire(app)
    assert [charged(first), charged(second)] == [(0, 2), (0, 0)]


def test_the_first_job_of_a_claim_is_charged_whatever_an_earlier_claim_left(app: TaskForge) -> None:
    @app.task(max_attempts=3)
    def job(n):
        return n

    first, second = job.delay(1), job.delay(2)
    claims, _ = app.broker.claims.dequeue(Q, 60_000, 2)
    assert app.broker.claims.requeue(Q, second.id, claims[1].token)  # given back unrun: refunded
    assert app.broker.claims.succeed(Q, first.id, claims[0].token, b"\xc0")
    [claim], _ = app.broker.claims.dequeue(Q, TINY_LEASE_MS, 2)
    assert (claim.id, claim.attempts) == (second.id, 1)
    assert expire(app) == ([second.id], [])
    assert charged(second) == (0, 1)  # started with its claim: the lost run counts, as a loss
