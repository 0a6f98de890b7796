"""The status library (taskforge.status) on both backends: in-process fakeredis and real Redis."""

from __future__ import annotations

import time

from taskforge import Priority, TaskForge
from taskforge import status as tf_status

from . import helpers


def test_counts_by_priority_and_state(app: TaskForge) -> None:
    helpers.running(app, "t", 0)
    helpers.retrying(app, "t", 1)
    first_dead = helpers.dead(app, "t", 2)
    time.sleep(0.005)  # two deaths in one millisecond tie, and Redis then orders them by id
    last_dead = helpers.dead(app, "t", 3)
    task = app.task_for("t")
    for priority in Priority:
        task.with_options(priority=priority).delay_many([(i,) for i in range(int(priority) + 1)])
    task.apply_in(60, 9)
    status = tf_status.status(app)
    (q,) = status.queues
    assert q.pending_by_priority == {"critical": 4, "high": 3, "normal": 2, "low": 1} and q.pending == 10
    assert (q.scheduled, q.retrying, q.running, q.dead, q.estimated) == (1, 1, 1, 2, False)
    assert status.next_due == q.next_due is not None
    assert [i.id for i in tf_status.dead_jobs(app)] == [last_dead, first_dead]
    assert [i.id for i in tf_status.dead_jobs(app, limit=1)] == [last_dead]


def test_split_is_estimated_from_a_sample_above_the_limit(app: TaskForge) -> None:
    for i in range(6):
        helpers.retrying(app, "t", i)
    for i in range(14):
        app.task_for("t").apply_in(60, i)
    exact = tf_status.queue_status(app, "default")
    assert (exact.scheduled, exact.retrying, exact.estimated) == (14, 6, False)
    sampled = tf_status.queue_status(app, "default", sample=10)
    assert sampled.estimated and sampled.scheduled + sampled.retrying == 20
    assert 0 <= sampled.retrying <= 12


def test_empty_queue(app: TaskForge) -> None:
    q = tf_status.queue_status(app, "nothing-here")
    assert (q.pending, q.scheduled, q.retrying, q.running, q.dead, q.next_due) == (0, 0, 0, 0, 0, None)
    assert tf_status.dead_jobs(app, ["nothing-here"]) == []
