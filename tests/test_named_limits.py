"""Named limits shared by tasks (``app.limit``): their checks at decoration, and the claim honouring them.

The claim is driven by hand (on ``memory://`` and on a real Redis alike): a
job of any task naming a limit takes a slot in it, and a job of another task
naming it waits while it is full, held, not failed. Real workers:
tests/worker/test_named_limits.py; under faults: tests/chaos.
"""

from __future__ import annotations

from typing import Any

import pytest

from taskforge import ConfigurationError, JobState, TaskForge

LEASE = 60_000


def claim(app: TaskForge, count: int = 4, queue: str = "default") -> list[Any]:
    return app.broker.claims.dequeue(queue, LEASE, count=count)[0]


def finish(app: TaskForge, claims: list[Any], queue: str = "default") -> None:
    oks, _ = app.broker.claims.settle(queue, [(c.id, c.token, b"\xc0") for c in claims])
    assert all(oks)


def test_two_tasks_sharing_a_limit_of_one_take_turns(app: TaskForge) -> None:
    app.limit("screens", concurrency=1)

    @app.task(limits=["screens"])
    def shot(n: int) -> None: ...

    @app.task(limits=["screens"], concurrency=3)
    def thumb(n: int) -> None: ...

    @app.task
    def plain(n: int) -> None: ...

    first, second, third = shot.delay(1), thumb.delay(2), shot.delay(3)
    other = plain.delay(4)
    got = claim(app)
    # One slot: a batch of four takes the first, and the job of a task without the limit goes past the held ones.
    assert [c.id for c in got] == [first.id, other.id]
    assert claim(app) == []
    assert second.info().state is JobState.PENDING and second.info().attempts == 0
    finish(app, got)
    got = claim(app)
    assert [c.id for c in got] == [second.id]  # in the order they were sent, across both tasks
    finish(app, got)
    assert [c.id for c in claim(app)] == [third.id]


def test_a_job_counts_against_its_tasks_own_limit_and_each_it_names(app: TaskForge) -> None:
    app.limit("a", concurrency=2)
    app.limit("b", concurrency=1)

    @app.task(limits=["a", "b"])
    def both(n: int) -> None: ...

    @app.task(limits=["a"])
    def only_a(n: int) -> None: ...

    first, second = both.delay(1), both.delay(2)
    a1, a2 = only_a.delay(3), only_a.delay(4)
    got = claim(app)
    # "b" is full after the first `both`, so the second waits; "a" has one slot left, which the first only_a takes.
    assert [c.id for c in got] == [first.id, a1.id]
    assert claim(app) == []
    held = [c for c in got if c.id == first.id]
    finish(app, held)  # frees a slot of "a" and of "b": the older job waiting gets it
    assert [c.id for c in claim(app)] == [second.id]
    assert claim(app) == [] and a2.info().state is JobState.PENDING


def test_a_shared_rate_counts_the_starts_of_every_task_naming_it(app: TaskForge) -> None:
    app.limit("pings", rate="2/h")

    @app.task(limits=["pings"])
    def ping_a() -> None: ...

    @app.task(limits=["pings"])
    def ping_b() -> None: ...

    jobs = [ping_a.delay(), ping_b.delay(), ping_b.delay()]
    started = claim(app) + claim(app) + claim(app)
    assert [c.id for c in started] == [jobs[0].id, jobs[1].id]
    assert jobs[2].info().state is JobState.PENDING


def test_a_keyed_task_naming_a_limit_obeys_it(app: TaskForge) -> None:
    app.limit("one", concurrency=1)

    @app.task(key="account", limits=["one"])
    def sync(account: str) -> None: ...

    @app.task(limits=["one"])
    def report() -> None: ...

    a, b, r = sync.delay("a"), sync.delay("b"), report.delay()
    got = claim(app)
    assert [c.id for c in got] == [a.id]  # two lanes, but one slot in the shared limit
    assert claim(app) == []
    finish(app, got)
    got = claim(app)
    assert len(got) == 1 and got[0].id in (b.id, r.id)


def test_an_unknown_limit_is_refused_at_decoration() -> None:
    app = TaskForge("t", broker="memory://")
    with pytest.raises(ConfigurationError, match=r"names limit 'screens', which is not defined: call app.limit"):
        app.task(name="t", limits=["screens"])(len)
    assert app.tasks == {}


def test_tasks_of_two_queues_cannot_share_a_limit() -> None:
    app = TaskForge("t", broker="memory://")
    app.limit("screens", concurrency=1)
    shot = app.task(name="shot", queue="media", limits=["screens"])(len)
    with pytest.raises(ConfigurationError) as refused:
        app.task(name="thumb", queue="default", limits=["screens"])(len)
    message = str(refused.value)
    assert "'shot' in queue 'media'" in message and "'thumb' in queue 'default'" in message
    with pytest.raises(ConfigurationError, match="would escape them"):
        shot.with_options(queue="other")
    assert shot.with_options(queue="media", priority="high").options.limits == ("screens",)


def test_limit_definitions_are_checked() -> None:
    app = TaskForge("t", broker="memory://")
    with pytest.raises(ConfigurationError, match="caps nothing"):
        app.limit("x")
    with pytest.raises(ConfigurationError, match="rate="):
        app.limit("x", rate="often")
    with pytest.raises(ConfigurationError, match="limit name"):
        app.limit("a|b", concurrency=1)
    app.limit("x", concurrency=2, rate="10/m")
    app.limit("x", concurrency=2, rate="10/m")  # the same again: a module imported twice
    with pytest.raises(ConfigurationError, match="already defined"):
        app.limit("x", concurrency=3)
    with pytest.raises(ConfigurationError, match="a list of limit names"):
        app.task(name="t", limits="x")(len)  # type: ignore[call-overload]
    task = app.task(name="t", limits=["x", "x"], concurrency=4)(len)
    assert task.options.limit_text == "0:1000:4|x=10:60000:2"
