"""What finished jobs leave behind, and for how long (docs/keyspace.md), on both backends.

A finished record expires after ``retention``; its search index entries go
with it, swept by expiry in short slices however many expire at once, and
``retention_count`` keeps at most that many finished records per queue.
"""

from __future__ import annotations

import time

import pytest

from taskforge import ConfigurationError, JobState, TaskForge
from taskforge.broker import calls
from taskforge.broker.keys import QueueKeys, search_index
from taskforge.broker.queue import new_token
from taskforge.testing import use_broker
from taskforge.worker.housekeeping import DamageLog, Sweeper


def expiring(app: TaskForge, queue: str = "default") -> int:
    return int(app.broker.client.zcard(QueueKeys(queue).prefix + "expiring"))


def records(app: TaskForge, queue: str = "default") -> set[str]:
    pattern = QueueKeys(queue).prefix + "job:*"
    return {k.decode().rsplit(":", 1)[1] for k in app.broker.client.scan_iter(match=pattern, count=1000)}


def test_one_sweep_duty_takes_the_entries_of_every_record_that_expired(broker_url: str) -> None:
    # Records outlive the drain (a loaded machine took seconds over it, and a record that expired
    # meanwhile is JobNotFound to the drain); 450 jobs still fill three of the sweep's slices of 200.
    app = TaskForge("tests", broker=broker_url, retention=3, dead_retention=60)

    @app.task
    def noop(n: int) -> None:
        return None

    @app.task(max_attempts=1)
    def boom() -> None:
        raise ValueError("kept for its dead_retention")

    noop.delay_many([(i,) for i in range(450)])
    dead = boom.delay()
    app.drain()
    waiting = noop.delay(-1)
    assert app.broker.client.zcard(search_index("default")) == 452 + 1  # t per job; d for the dead one
    time.sleep(3.1)
    # What a worker runs with every reclaim, about once a second; its budget is
    # 50 ms a tick, more here so that a loaded test machine sweeps it all at once.
    Sweeper(app.broker.cleanup, DamageLog(), budget=30.0).run(["default"], idle=False, now=time.monotonic())
    left = {m.decode() for m in app.broker.client.zrange(search_index("default"), 0, -1)}
    assert len(left) == 3 and all(dead.id in m or waiting.id in m for m in left), sorted(left)[:8]
    assert expiring(app) == 1  # the dead job's, due in a minute
    assert [j.id for j in app.find_jobs().jobs] == [waiting.id, dead.id]


def test_each_sweep_call_looks_at_one_slice_and_says_whether_more_is_due(broker_url: str) -> None:
    app = TaskForge("tests", broker=broker_url, retention=0.2)

    @app.task
    def noop(n: int) -> None:
        return None

    noop.delay_many([(i,) for i in range(250)])
    app.drain()
    time.sleep(0.3)
    call = calls.sweep(QueueKeys("default"), limit=100)
    assert [app.broker.scripts.run(call) for _ in range(4)] == [(100, True), (100, True), (50, False), (0, False)]
    assert app.broker.client.zcard(search_index("default")) == 0


def test_a_dead_job_retried_keeps_its_entries_after_its_dead_retention(broker_url: str) -> None:
    app = TaskForge("tests", broker=broker_url, retention=0.2, dead_retention=0.2)
    runs: list[int] = []

    @app.task(max_attempts=1)
    def flaky() -> None:
        runs.append(1)
        if len(runs) == 1:
            raise ValueError("first run fails")

    job = flaky.delay()
    app.drain()
    assert job.status() is JobState.DEAD and expiring(app) == 1
    assert app.job(job.id).retry()
    assert expiring(app) == 0  # its record no longer expires
    time.sleep(0.3)
    app.broker.cleanup.sweep("default", 5.0)
    assert [j.id for j in app.find_jobs(state="pending").jobs] == [job.id]
    app.drain()
    assert job.status() is JobState.SUCCEEDED and expiring(app) == 1


def test_retention_count_keeps_the_last_finished_records_of_each_queue(broker_url: str) -> None:
    app = TaskForge("tests", broker=broker_url, retention_count=5)

    @app.task
    def noop(n: int) -> int:
        return n

    @app.task(max_attempts=1)
    def boom() -> None:
        raise ValueError("dead, and counted")

    handles = []
    for i in range(12):  # one at a time, so the last five to finish are known
        handles.append(noop.delay(i))
        app.drain()
    assert records(app) == {h.id for h in handles[-5:]}
    assert handles[-1].result(timeout=1) == 11
    dead = boom.delay()
    app.drain()
    assert dead.id in records(app) and len(records(app)) == 5
    assert expiring(app) == 5
    assert app.broker.client.zcard(search_index("default")) == 5 + 1  # t each; the dead one's d
    assert app.broker.client.zcard(QueueKeys("default").dead) == 1


def test_retention_count_per_queue_and_through_a_batch_of_results(broker_url: str) -> None:
    app = TaskForge("tests", broker=broker_url, retention_count={"small": 3})

    @app.task(queue="small")
    def small(n: int) -> int:
        return n

    @app.task(queue="big")
    def big(n: int) -> int:
        return n

    big.delay_many([(i,) for i in range(10)])
    app.drain()
    assert len(records(app, "big")) == 10  # no count for this queue
    small.delay_many([(i,) for i in range(10)])
    claims = app.broker.claims
    batch = claims.dequeue("small", 30_000, count=10)
    results = [(claim.id, claim.token, b"\xc0") for claim in batch.claims]
    oks, _ = claims.settle("small", results)  # what a worker's lane sends after a batch: one script call
    assert oks == [True] * 10
    assert len(records(app, "small")) == 3 and expiring(app, "small") == 3


def test_busy_queues_keep_their_own_last_outcomes_on_the_lanes_path(broker_url: str) -> None:
    # What a busy lane does: each success claims the next job in the same call (succeed_and_claim),
    # so records finish many to a millisecond; each queue keeps its own count of the last to finish.
    app = TaskForge("tests", broker=broker_url, retention_count={"a": 4, "b": 7})

    @app.task(queue="a")
    def in_a(n: int) -> int:
        return n

    @app.task(queue="b")
    def in_b(n: int) -> int:
        return n

    claims = app.broker.claims
    for queue, task, keep in (("a", in_a, 4), ("b", in_b, 7)):
        handles = task.delay_many([(i,) for i in range(60)])
        following, _ = claims.dequeue(queue, 30_000, token=new_token())
        finished = []
        while following and following[0] is not None:
            claim = following[0]
            done, (following, _) = claims.succeed_and_claim(queue, claim.id, claim.token, b"\xc0", 30_000, new_token())
            assert done
            finished.append(claim.id)
        assert sorted(finished) == sorted(h.id for h in handles)
        assert records(app, queue) == set(finished[-keep:]), queue
        assert expiring(app, queue) == keep
        assert app.broker.client.zcard(search_index(queue)) == keep  # one entry per record kept


def test_a_count_lowered_is_reached_by_the_sweep(broker_url: str) -> None:
    app = TaskForge("tests", broker=broker_url)

    @app.task
    def noop(n: int) -> None:
        return None

    noop.delay_many([(i,) for i in range(30)])
    app.drain()
    lowered = TaskForge("tests", broker=broker_url, retention_count=4)
    if broker_url.startswith("memory:"):
        use_broker(lowered, app.broker)
        app.broker.link.retention_count.update(lowered.retention_count)
    lowered.broker.cleanup.sweep("default", 5.0)
    assert len(records(app)) == 4 and expiring(app) == 4


@pytest.mark.parametrize("value", [-1, 1.5, True, "10", {"default": -2}, {"bad queue\n": 1}])
def test_a_bad_retention_count_is_refused_at_once(value: object) -> None:
    with pytest.raises(ConfigurationError, match="retention_count|queue name"):
        TaskForge("tests", broker="memory://", retention_count=value)  # type: ignore[arg-type]


class CountingCleanup:
    """A stand-in for ``Cleanup``: each queue's sweep answers from a script of (taken, more) replies."""

    def __init__(self, replies: dict[str, list[tuple[int, bool]]]) -> None:
        self.replies = replies
        self.calls: list[str] = []

    def sweep(self, queue: str, budget: float) -> tuple[int, bool]:
        self.calls.append(queue)
        return self.replies[queue].pop(0) if self.replies[queue] else (0, False)


def test_an_idle_worker_sweeps_once_a_minute_and_on_while_behind() -> None:
    cleanup = CountingCleanup({"a": [(200, True), (200, True)], "b": []})
    sweeper = Sweeper(cleanup, DamageLog())  # type: ignore[arg-type]
    sweeper.run(["a", "b"], idle=True, now=100.0)  # the first idle tick looks at every queue
    assert cleanup.calls == ["a", "b"]
    sweeper.run(["a", "b"], idle=True, now=105.0)  # a is behind: swept on; b waits for the minute
    sweeper.run(["a", "b"], idle=True, now=110.0)
    assert cleanup.calls == ["a", "b", "a", "a"]
    sweeper.run(["a", "b"], idle=True, now=115.0)  # a caught up (its last slice was not full)
    assert cleanup.calls == ["a", "b", "a", "a"]
    sweeper.run(["a", "b"], idle=True, now=161.0)
    sweeper.run(["a", "b"], idle=False, now=162.0)  # busy: every tick
    assert cleanup.calls == ["a", "b", "a", "a", "a", "b", "a", "b"]
