"""Fair turns between keys, and per-key limits, in the claim itself (docs/howto/keys.md).

Each test runs on the embedded broker and on real Redis (the ``app``
fixture), against the claim script directly: what a worker's lane gets.
"""

from __future__ import annotations

from typing import Any

import pytest

from taskforge import ConfigurationError, JobState, QueueFull, TaskForge
from taskforge.broker.keys import QueueKeys
from tests.conftest import inspector

LEASE = 60_000


def claim(app: TaskForge, count: int = 1, queue: str = "default") -> list[Any]:
    return app.broker.claims.dequeue(queue, LEASE, count=count)[0]


def keys_of(claims: list[Any]) -> list[str]:
    return [c.args[0] for c in claims]


def finish(app: TaskForge, claims: list[Any]) -> None:
    oks, _ = app.broker.claims.settle("default", [(c.id, c.token, b"\xc0") for c in claims])
    assert all(oks)


def ahead_of(got: list[tuple[str, int]], job: tuple[str, int]) -> dict[str, int]:
    """How many jobs of each key were claimed before ``job`` (keyless jobs under "-")."""
    before: dict[str, int] = {}
    for key, _ in got[: got.index(job)]:
        before[key] = before.get(key, 0) + 1
    return before


def test_a_key_with_many_ready_jobs_delays_another_key_by_one_job(app: TaskForge) -> None:
    @app.task(key="account")
    def sync(account: str, n: int) -> None: ...

    sync.delay_many([("big", n) for n in range(500)])
    sync.delay("small", 0)
    # small takes the turn at the front: behind at most the busy key's first job.
    first = keys_of(claim(app, 1)) + keys_of(claim(app, 1))
    assert sorted(first) == ["big", "small"]
    # A batch takes the keys in turn too: one job per key per turn.
    sync.delay("other", 0)
    sync.delay("third", 0)
    batch = keys_of(claim(app, 4))
    assert sorted(batch[:3]) == ["big", "other", "third"]
    assert batch[3] == "big"


def test_first_in_first_out_within_a_key_and_one_job_per_key_per_turn(app: TaskForge) -> None:
    @app.task(key="account")
    def sync(account: str, n: int) -> None: ...

    @app.task
    def plain(n: int) -> None: ...

    for n in range(3):
        sync.delay("a", n)
    plain.delay(100)
    sync.delay("b", 0)
    sync.delay("b", 1)
    got = [(c.args[0], c.args[1]) if len(c.args) == 2 else ("-", c.args[0]) for c in claim(app, 10)]
    # Each key's jobs in the order sent, one job per key per turn: a new
    # key's first job takes the turn at the front (behind at most one job of
    # each other key); keyless jobs, in the order sent, take the turns after
    # the last keyless number handed out, one each (a keyless job sent
    # after a's three waits behind at most two of them).
    assert [n for key, n in got if key == "a"] == [0, 1, 2], got
    assert [n for key, n in got if key == "b"] == [0, 1], got
    assert all(n <= 1 for n in ahead_of(got, ("b", 0)).values()), got
    assert all(n <= 2 for n in ahead_of(got, ("-", 100)).values()), got
    assert got[-1] == ("a", 2), got


def test_priority_still_comes_first(app: TaskForge) -> None:
    @app.task(key="account")
    def sync(account: str, n: int) -> None: ...

    for n in range(5):
        sync.delay("a", n)
    sync.with_options(priority="high").delay("b", 0)
    sync.with_options(priority="critical").delay("a", 99)
    got = [(c.args[0], c.args[1]) for c in claim(app, 3)]
    assert got == [("a", 99), ("b", 0), ("a", 0)]


def test_counts_max_size_cancel_and_purge_see_the_lanes(broker_url: str) -> None:
    bounded = TaskForge("bounded", broker=broker_url, max_size=3)

    @bounded.task(key="account")
    def sync(account: str, n: int) -> None: ...

    handles = [sync.delay("a", 0), sync.with_options(priority="high").delay("b", 1), sync.delay("a", 2)]
    with pytest.raises(QueueFull):
        sync.delay("c", 3)
    counts = bounded.broker.inspection.counts("default")
    assert counts["pending"] == 3
    assert bounded.broker.inspection.pending_by_priority("default") == {0: 0, 1: 2, 2: 1, 3: 0}
    assert handles[0].cancel() is True
    assert bounded.broker.inspection.counts("default")["pending"] == 2
    assert bounded.broker.cleanup.purge("default", "pending") == 2
    assert bounded.broker.inspection.counts("default")["pending"] == 0
    assert claim(bounded, 5) == []


def test_an_idle_key_leaves_nothing_behind(app: TaskForge) -> None:
    @app.task(key="account", key_concurrency=1, key_rate_limit="100/s")
    def sync(account: str, n: int) -> None: ...

    @app.task(key="account")
    def free(account: str) -> None: ...

    for n in range(3):
        sync.delay(f"k{n}", n)
        free.delay(f"k{n}")
    while claims := claim(app, 4):
        finish(app, claims)
    app.broker.claims.reclaim("default")  # a worker's periodic reclaim sweeps idle keys' turn entries
    client = inspector(app)
    q = QueueKeys("default")
    left = sorted(k.decode() for k in client.keys(q.prefix + "*") if b":job:" not in k)
    per_key = [
        k
        for k in left
        if any(part in k for part in (":lane:", ":key_active:", ":turns", ":key_turns", ":held", ":lane_size"))
    ]
    # Only the rate windows stay, and only for their window (a TTL).
    assert [k for k in per_key if ":key_rate:" not in k] == []
    assert all(client.pttl(k) > 0 for k in left if ":key_rate:" in k)


def test_key_concurrency_holds_a_key_back_and_lets_other_keys_run(app: TaskForge) -> None:
    @app.task(key="account", key_concurrency=1)
    def sync(account: str, n: int) -> None: ...

    for n in range(3):
        sync.delay("a", n)
    b = sync.delay("b", 0)
    first = claim(app, 1)
    assert keys_of(first) == ["a"]
    # a is at its cap: the next claims take b, then nothing (a's jobs are held, not failed).
    assert keys_of(claim(app, 4)) == ["b"]
    assert claim(app, 4) == []
    assert app.broker.flow.held("default") == 2
    waiting = sync.delay("a", 9)
    info = waiting.info()
    assert info.state is JobState.PENDING and info.attempts == 0
    assert b.info().held is None
    finish(app, first)  # a's slot frees: its lane's turn is back at once
    again = claim(app, 4)
    assert keys_of(again) == ["a"] and again[0].args[1] == 1 and again[0].attempts == 1


def test_a_held_job_says_why(app: TaskForge) -> None:
    @app.task(key="account", key_concurrency=1)
    def sync(account: str, n: int) -> None: ...

    sync.delay("a", 0)
    waiting = sync.delay("a", 1)
    claim(app, 1)
    assert claim(app, 1) == []  # the claim found a's lane at its cap and held it
    assert waiting.info().held == "key_concurrency=1 reached for key 'a' (1 running)"
    app.pause("default")
    assert waiting.info().held == "its queue is paused"


def test_key_rate_limit_bounds_starts_per_key_and_says_when(app: TaskForge) -> None:
    @app.task(key="account", key_rate_limit="2/h")
    def sync(account: str, n: int) -> None: ...

    for n in range(4):
        sync.delay("a", n)
    sync.delay("b", 0)
    got = keys_of(claim(app, 2)) + keys_of(claim(app, 2)) + keys_of(claim(app, 2))
    assert sorted(got) == ["a", "a", "b"]
    assert app.broker.flow.held("default") == 2
    reply = app.broker.claims.dequeue("default", LEASE, count=1)
    assert reply.claims == [] and reply.next_due is not None and reply.next_due > 0
    assert sync.delay("a", 9).info().held == "key_rate_limit=2/h reached for key 'a'"
    assert claim(app, 1) == []


def test_per_key_limits_compose_with_the_task_wide_ones(app: TaskForge) -> None:
    @app.task(key="account", key_concurrency=2, concurrency=3)
    def sync(account: str, n: int) -> None: ...

    for key in "abc":
        for n in range(3):
            sync.delay(key, n)
    running = claim(app, 10)
    assert len(running) == 3  # the task's own cap
    assert max(keys_of(running).count(k) for k in "abc") <= 2
    assert claim(app, 10) == []
    finish(app, running[:1])
    assert len(claim(app, 10)) == 1


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"key_concurrency": 2}, "key_concurrency= without key="),
        ({"key_rate_limit": "5/s"}, "key_rate_limit= without key="),
        ({"key": "account", "key_concurrency": 0}, "key_concurrency=0"),
        ({"key": "account", "key_concurrency": True}, "key_concurrency=True"),
        ({"key": "account", "key_rate_limit": "fast"}, "key_rate_limit='fast'"),
        ({"key": "account", "key_rate_limit": "0/s"}, "key_rate_limit='0/s'"),
    ],
)
def test_bad_key_limits_fail_at_decoration(app: TaskForge, options: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message.replace("=", "=").replace("(", r"\(")):

        @app.task(**options)
        def sync(account: str) -> None: ...

    assert app.broker.inspection.counts("default")["pending"] == 0


def test_with_options_key_of_a_limited_task_shares_the_cap(app: TaskForge) -> None:
    @app.task(key="account", key_concurrency=1)
    def sync(account: str) -> None: ...

    sync.with_options(key="vip").delay("x")
    sync.with_options(key="vip").delay("y")
    first = claim(app, 4)
    assert [c.args[0] for c in first] == ["x"]
    assert claim(app, 4) == []  # "y" shares "vip"'s one slot: held
    assert sync.with_options(key="vip").delay("z").info().key == "vip"
    finish(app, first)
    assert [c.args[0] for c in claim(app, 4)] == ["y"]


def test_a_key_held_by_the_task_wide_cap_starts_as_soon_as_a_slot_frees(app: TaskForge) -> None:
    @app.task(key="account", concurrency=1)
    def sync(account: str) -> None: ...

    sync.delay("a")
    b = sync.delay("b")
    first = claim(app, 4)
    assert keys_of(first) == ["a"]
    assert claim(app, 4) == []  # b waits for the task's one slot
    assert b.info().held == f"concurrency=1 reached for task {sync.name} (1 running)"
    finish(app, first)
    assert keys_of(claim(app, 4)) == ["b"]  # at once, not after the 5 s recheck
