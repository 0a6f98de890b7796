"""Turns of keyed jobs of tasks without limits: they wait in the main pending set, each at its key's next turn.

What the claim's order promises is in ``test_fair_turns.py``; here, that every
way a job enters the line keeps its key's entry (its last turn) true (a job
put back keeps its turn, a retried one takes its key's next, a cancelled one
never lets a later job of its key go first), that the entries of idle keys
go (the reclaim's sweeps, a purge), and that a damaged entry costs a job its
turn, never the job. Both backends, against the scripts directly.
"""

from __future__ import annotations

from typing import Any

from taskforge import JobState, TaskForge
from taskforge.broker.keys import QueueKeys

LEASE = 60_000
Q = QueueKeys("default")


def claim(app: TaskForge, count: int = 1) -> list[Any]:
    return app.broker.claims.dequeue("default", LEASE, count=count)[0]


def entries(app: TaskForge) -> dict[str, float]:
    """Open lane -> the last turn its key was given."""
    raw = app.broker.client.hgetall(Q.key_turns)
    return {k.decode(): float(v) for k, v in raw.items()}


def sweep(app: TaskForge) -> None:
    """The worker's periodic reclaim, which also sweeps stale turn entries (a bounded step each)."""
    app.broker.claims.reclaim("default")


def test_a_keys_entry_is_its_last_turn_and_goes_once_it_is_idle(app: TaskForge) -> None:
    @app.task(key="account")
    def sync(account: str, n: int) -> None: ...

    for n in range(3):
        sync.delay("a", n)
    sync.delay("b", 0)
    first = entries(app)
    assert sorted(first) == ["2:0:a", "2:0:b"] and first["2:0:a"] == first["2:0:b"] + 2
    got = claim(app, 2)
    assert sorted(c.args for c in got) == [("a", 0), ("b", 0)]
    sweep(app)  # b is idle now, a is not
    assert sorted(entries(app)) == ["2:0:a"]
    while claim(app, 4):
        pass
    sweep(app)
    assert entries(app) == {}
    client = app.broker.client
    assert not client.exists(Q.turns, Q.lane_size, Q.lane_jobs, Q.held, Q.prefix + "key_turns_at")


def test_the_sweep_goes_in_bounded_steps_and_ends(app: TaskForge) -> None:
    @app.task(key="account")
    def sync(account: str) -> None: ...

    sync.delay_many([(f"k{n}",) for n in range(2_500)])
    while claim(app, 256):
        pass
    assert len(entries(app)) == 2_500
    sweep(app)
    assert 0 < len(entries(app)) < 2_500  # one step looks at about a thousand entries
    for _ in range(5):
        sweep(app)
    assert entries(app) == {}
    assert not app.broker.client.exists(Q.prefix + "key_turns_at")


def test_a_job_put_back_keeps_its_turn_and_a_retried_one_takes_its_keys_next(app: TaskForge) -> None:
    @app.task(key="account")
    def sync(account: str, n: int) -> None: ...

    for n in range(3):
        sync.delay("a", n)
    first = claim(app, 1)[0]
    assert first.args == ("a", 0)
    # Taken but never started (a lane's batch given back): back at its own turn, first again.
    assert app.broker.claims.requeue("default", first.id, first.token)
    again = claim(app, 1)[0]
    assert again.args == ("a", 0)
    # Failed, to be retried: once due, behind the key's jobs already waiting.
    assert app.broker.claims.fail("default", again.id, again.token, "boom", "", retry_in=0.0) == "retrying"
    app.broker.claims.fast_forward("default", 1.0)
    order = []
    while got := claim(app, 1):
        order.append(got[0].args)
    assert order == [("a", 1), ("a", 2), ("a", 0)]
    sweep(app)
    assert entries(app) == {}


def test_cancelling_a_keys_last_job_never_lets_a_later_one_jump_its_line(app: TaskForge) -> None:
    @app.task(key="account")
    def sync(account: str, n: int) -> None: ...

    for n in range(3):
        sync.delay("a", n)
    last = sync.delay("a", 3)
    assert last.cancel() is True
    sync.delay("a", 4)
    order = [c.args[1] for c in claim(app, 10)]
    assert order == [0, 1, 2, 4]
    sweep(app)
    assert entries(app) == {}


def test_a_purge_leaves_no_turns_behind(app: TaskForge) -> None:
    @app.task(key="account")
    def sync(account: str, n: int) -> None: ...

    sync.delay_many([(f"k{n % 50}", n) for n in range(200)])
    assert len(entries(app)) == 50
    assert app.broker.cleanup.purge("default", "pending") == 200
    assert app.broker.client.exists(Q.key_turns) == 0
    assert claim(app, 4) == []


def test_keyless_jobs_take_one_turn_each_among_the_keys(app: TaskForge) -> None:
    @app.task(key="account")
    def sync(account: str, n: int) -> None: ...

    @app.task
    def plain(n: int) -> None: ...

    sync.delay_many([("busy", n) for n in range(100)])
    plain.delay_many([(n,) for n in range(100)])
    got = ["-" if len(c.args) == 1 else c.args[0] for c in claim(app, 40)]
    # Neither the busy key nor the keyless jobs wait for the other's backlog.
    assert abs(got.count("busy") - got.count("-")) <= 2
    keyless = [c.args[0] for c in claim(app, 200) if len(c.args) == 1]
    assert keyless == sorted(keyless)


def test_a_damaged_entry_costs_a_turn_never_a_job(app: TaskForge) -> None:
    @app.task(key="account")
    def sync(account: str, n: int) -> None: ...

    sync.delay("a", 0)
    app.broker.client.hset(Q.key_turns, mapping={"2:0:a": "junk", "not a lane": "1"})
    sweep(app)
    assert entries(app) == {}  # junk and strangers swept
    sync.delay("a", 1)
    app.broker.client.delete(Q.key_turns)
    app.broker.client.set(Q.key_turns, "not a hash")
    handle = sync.delay("a", 2)
    assert handle.info().state is JobState.PENDING
    got = sorted(c.args[1] for c in claim(app, 10))
    assert got == [0, 1, 2]
    sweep(app)  # the sweep steps past what it cannot read
    assert app.broker.client.get(Q.key_turns) == b"not a hash"
