"""``settle``: a batch's successes recorded together, each fenced on its own claim, with the next claim."""

from __future__ import annotations

from taskforge import JobState, TaskForge
from taskforge.serialization import dumps_result

from .lost_reply import lose_reply

LEASE = 30_000


def sent(app: TaskForge, n: int) -> list:
    """Handles of ``n`` jobs of a no-op task, in the order sent."""

    @app.task
    def work(n):
        return n

    return [work.delay(i) for i in range(n)]


def test_each_result_is_fenced_on_its_own_token_and_the_next_batch_is_claimed(app: TaskForge) -> None:
    handles = sent(app, 5)
    claims = app.broker.claims
    first, second = claims.dequeue("default", LEASE, 2)[0]
    # The second job's claim is taken over: given back, then claimed again under another token.
    assert claims.requeue("default", second.id, second.token)
    [again] = claims.dequeue("default", LEASE, 1)[0]
    assert again.id == second.id and again.token != second.token
    results = [(first.id, first.token, dumps_result("one")), (second.id, second.token, dumps_result("late"))]
    done, following = claims.settle("default", results, LEASE, "next-token", 3)
    assert done == [True, False]  # the late report of the second job writes nothing
    assert following is not None
    assert [c.id for c in following.claims] == [h.id for h in handles[2:]]
    assert {c.token for c in following.claims} == {"next-token"}
    assert handles[0].result(timeout=1) == "one"
    assert handles[1].status() is JobState.RUNNING  # still the new claim's
    assert claims.settle("default", [(again.id, again.token, dumps_result("two"))]) == ([True], None)
    assert handles[1].result(timeout=1) == "two"


def test_a_settle_whose_reply_was_lost_gets_the_same_claims_back(app: TaskForge) -> None:
    handles = sent(app, 4)
    claims = app.broker.claims
    [claim] = claims.dequeue("default", LEASE, 1)[0]
    results = [(claim.id, claim.token, dumps_result(0))]
    lost = lose_reply(app.broker, lambda: claims.settle("default", results, LEASE, "tok", 2))
    done, following = claims.settle("default", results, LEASE, "tok", 2)
    assert done == [False]  # recorded by the try whose reply was lost: fenced now
    assert handles[0].result(timeout=1) == 0
    assert following is not None
    assert [c.id for c in following.claims] == [h.id for h in handles[1:3]]
    assert [row.id.decode() for row in lost.next.rows] == [c.id for c in following.claims]
