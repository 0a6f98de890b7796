"""The plain claim pays only for what it uses; the rare paths still work when they happen.

A lost reply (the script ran, the client never read its answer) is simulated
by dropping the reply of a real script run (``lost_reply.lose_reply``); the
client's next call with the same token carries the retry flag and must get
the very same jobs back, on memory:// and on a real Redis.
"""

from __future__ import annotations

from taskforge import JobState, Priority, Task, TaskForge
from taskforge.broker import calls, connection
from taskforge.broker.keys import QueueKeys

from .lost_reply import lose_reply

LEASE = 30_000
Q = QueueKeys("default")


def test_a_lost_dequeue_reply_hands_back_the_same_jobs(app: TaskForge) -> None:
    @app.task
    def job(n):
        return n

    handles = [job.delay(n) for n in range(4)]
    lost = lose_reply(app.broker, lambda: app.broker.claims.dequeue("default", LEASE, 2, token="t1"))
    assert [row.id.decode() for row in lost.rows] == [h.id for h in handles[:2]]
    again, _ = app.broker.claims.dequeue("default", LEASE, 2, token="t1")  # the re-send, with the retry flag
    assert [(c.id, c.attempts) for c in again] == [(h.id, 1) for h in handles[:2]]
    assert app.broker.inspection.counts("default")["pending"] == 2  # nothing more was claimed
    for claim in again:
        assert app.broker.claims.succeed("default", claim.id, "t1", b"\xc0")
    nxt, _ = app.broker.claims.dequeue("default", LEASE, 2, token="t1")  # answered: a fresh claim now
    assert [c.id for c in nxt] == [h.id for h in handles[2:]]


def low_and_high(app: TaskForge) -> tuple[Task[..., object], Task[..., object]]:
    """Two tasks of the default queue, LOW and HIGH priority, each returning its argument."""

    @app.task(priority=Priority.LOW)
    def later(n):
        return n

    @app.task(priority=Priority.HIGH)
    def urgent(n):
        return n

    return later, urgent


def test_the_same_jobs_come_back_in_their_order_in_line(app: TaskForge) -> None:
    later, urgent = low_and_high(app)
    line = [later.delay(0), urgent.delay(1), later.delay(2), urgent.delay(3)]
    lost = lose_reply(app.broker, lambda: app.broker.claims.dequeue("default", LEASE, 3, token="t2"))
    again, _ = app.broker.claims.dequeue("default", LEASE, 3, token="t2")
    assert [c.id for c in again] == [row.id.decode() for row in lost.rows]
    assert [c.id for c in again] == [line[1].id, line[3].id, line[0].id]


def test_a_higher_priority_job_arriving_during_a_multi_job_claim_is_not_held_back(app: TaskForge) -> None:
    """A claim of several jobs whose reply is lost, then a HIGH job: the re-send hands back
    exactly the lost claim (not the HIGH job, not more LOW ones), and the HIGH job is the
    next one anybody claims, ahead of the LOW jobs still in line."""

    later, urgent = low_and_high(app)
    line = [later.delay(n) for n in range(5)]
    lost = lose_reply(app.broker, lambda: app.broker.claims.dequeue("default", LEASE, 3, token="t4"))
    assert [row.id.decode() for row in lost.rows] == [h.id for h in line[:3]]
    jumped = urgent.delay(99)  # arrives while the lost claim's jobs are held
    again, _ = app.broker.claims.dequeue("default", LEASE, 3, token="t4")  # the re-send
    assert [(c.id, c.attempts) for c in again] == [(h.id, 1) for h in line[:3]]
    assert jumped.status() is JobState.PENDING
    nxt, _ = app.broker.claims.dequeue("default", LEASE, 2, token="t5")
    assert [c.id for c in nxt] == [jumped.id, line[3].id]
    counts = app.broker.inspection.counts("default")
    assert (counts["pending"], counts["running"]) == (1, 5)


def test_a_lost_reply_of_a_chained_claim_hands_back_the_next_job(app: TaskForge) -> None:
    @app.task
    def job(n):
        return n

    first, second = job.delay(1), job.delay(2)
    [claim], _ = app.broker.claims.dequeue("default", LEASE)

    def chained() -> object:
        return app.broker.claims.succeed_and_claim("default", claim.id, claim.token, b"\xc0", LEASE, "next")

    lose_reply(app.broker, chained)
    assert first.status() is JobState.SUCCEEDED
    _, (claims, _) = app.broker.claims.succeed_and_claim("default", claim.id, claim.token, b"\xc0", LEASE, "next")
    assert [c.id for c in claims] == [second.id]
    assert app.broker.inspection.counts("default")["running"] == 1


def test_a_claim_re_sent_by_the_client_library_hands_back_both_sends(app: TaskForge) -> None:
    """redis-py re-sends a command after a connection error, without the retry flag."""

    @app.task
    def job(n):
        return n

    handles = [job.delay(n) for n in range(3)]
    real = app.broker.scripts.run
    sends: list[object] = []

    def sent_twice(call):  # the first reply lost on the way, the command sent again
        if not sends:
            sends.append(real(call))
            connection._resends.count = connection.resends() + 1
        return real(call)

    app.broker.scripts.run = sent_twice  # type: ignore[method-assign]
    try:
        claims, _ = app.broker.claims.dequeue("default", LEASE, token="t3")
    finally:
        del app.broker.scripts.run
    assert [c.id for c in claims] == [h.id for h in handles[:2]]  # none left orphaned until its lease ends


def test_an_enqueue_re_sent_after_a_lost_reply_changes_nothing(app: TaskForge) -> None:
    from taskforge.broker.queue import NewJob

    job = NewJob(id="fixed-id", task="t", payload=b"\x92\x90\x80", priority=1, max_attempts=3)
    app.broker.jobs.enqueue("default", [job])
    [claim], _ = app.broker.claims.dequeue("default", LEASE)
    app.broker.claims.succeed("default", claim.id, claim.token, b"\xc0")
    app.broker.scripts.run(calls.enqueue(Q, max_size=0, resend=True, jobs=[job]))  # the re-send
    assert app.job("fixed-id").status() is JobState.SUCCEEDED
    assert app.broker.inspection.counts("default")["pending"] == 0


def test_a_claim_that_skipped_promotion_and_limits_still_finds_them_before_idling(app: TaskForge) -> None:
    """A client whose flags are stale (no limits known, promotion not due) never idles past ready work."""
    producer = TaskForge("producer", broker=app.broker.url) if app.broker.url != "memory://" else app

    @producer.task(name="limited", concurrency=1)
    def limited() -> None: ...

    app.broker.claims.hints.promote_every_s = 3600
    app.broker.claims.dequeue("default", LEASE)  # promotes once, and learns "no limits"
    held = limited.delay()
    if producer is app:  # one client: make it forget what its own enqueue taught it
        app.broker.claims.hints._limited["default"] = (False, float("inf"))
    claims, _ = app.broker.claims.dequeue("default", LEASE)
    assert [c.id for c in claims] == [held.id]


def test_a_plain_enqueue_is_never_re_sent_by_the_client_library() -> None:
    """redis-py re-sends a command whose connection failed; a plain enqueue (no id check) must not be."""
    from redis.backoff import NoBackoff
    from redis.exceptions import ConnectionError as RedisConnectionError

    retry = connection.CountingRetry(NoBackoff(), 2)
    sent: list[int] = []

    def send() -> str:
        sent.append(1)
        raise RedisConnectionError("reply lost")

    for guarded, expected in ((True, 1), (False, 3)):
        sent.clear()
        try:
            if guarded:
                with connection.sent_once():
                    retry.call_with_retry(send, lambda error: None)
            else:
                retry.call_with_retry(send, lambda error: None)
        except RedisConnectionError:
            pass
        assert len(sent) == expected, (guarded, sent)


def test_an_enqueue_whose_reply_is_lost_is_re_sent_checked_and_stored_once(app: TaskForge, monkeypatch) -> None:
    """The broker's own retry after a lost enqueue reply re-sends with the id check: one job, not two."""
    from taskforge.errors import BrokerUnavailable

    @app.task
    def job(n):
        return n

    real = app.broker.link.durability.enqueue_once
    tries: list[object] = []

    def lose_first_reply(call):
        reply = real(call)
        tries.append(call)
        if len(tries) == 1:
            # Someone already claimed and finished it while the reply was lost.
            [claim], _ = app.broker.claims.dequeue("default", LEASE)
            app.broker.claims.succeed("default", claim.id, claim.token, b"\xc0")
            raise BrokerUnavailable("the reply was lost")
        return reply

    monkeypatch.setattr(app.broker.link.durability, "enqueue_once", lose_first_reply)
    handle = job.delay(1)
    assert len(tries) == 2
    assert handle.status() is JobState.SUCCEEDED  # not stored again as a new pending job
    assert app.broker.inspection.counts("default")["pending"] == 0


def test_a_child_writes_its_counts_while_its_lanes_run_long_jobs(app: TaskForge) -> None:
    """The counts of a success followed by a job of an hour still reach Redis within seconds."""
    import threading
    import time

    from taskforge.worker.child import keep_counts_written

    stop = threading.Event()
    writer = keep_counts_written(app.broker.claims.tally, stop)
    try:
        app.broker.claims.tally.count_success("long-job")  # not due yet: the lane that counted it is busy now
        deadline = time.monotonic() + 10
        written = 0
        while time.monotonic() < deadline and not written:
            time.sleep(0.1)
            written = sum(
                int(app.broker.client.hget(key, "succeeded") or 0)
                for key in app.broker.client.scan_iter(match="taskforge:{long-job}:stats:*")
            )
        assert written == 1
        assert not app.broker.claims.tally.flush_on_idle  # the thread writes them: a lane going idle need not
    finally:
        stop.set()
        writer.join(5)
        app.broker.claims.tally.flush_on_idle = True
    assert not writer.is_alive()  # and it stops when told: no write after its broker is gone
