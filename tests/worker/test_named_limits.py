"""Named limits shared by several tasks (``app.limit``), across real worker processes.

Each run records its start and end on the side Redis's clock; the caps are
checked from those spans. Half the jobs are sent by name from a producer
that does not know the tasks: they obey the limits the workers published.
"""

from __future__ import annotations

import pytest

from taskforge import JobState, TaskForge
from taskforge.broker import workers

from ..intervals import most_at_once
from .conftest import final, wait_for

pytestmark = [pytest.mark.redis, pytest.mark.slow]
LIMITS = "limitsapp:app"


def spans(side, key: str) -> list[tuple[float, float]]:
    return [tuple(float(x) for x in raw.split()) for raw in side.lrange(f"side:{key}", 0, -1)]  # type: ignore[misc]


def both_up(producer: TaskForge, started: list) -> None:
    wait_for(
        lambda: (
            {w["pid"] for w in workers.live_workers(producer.broker.client) if len(w["processes"]) >= 3}
            >= {worker.pid for worker in started}
        ),
        60,
        "both workers to list their children",
    )


def test_two_tasks_sharing_a_limit_of_one_never_run_at_once(start_worker, redis_url: str, side) -> None:
    producer = TaskForge("producer", broker=redis_url)
    started = [start_worker("-c", "2", "-q", "shared", app=LIMITS) for _ in range(2)]
    both_up(producer, started)
    handles = []
    for _ in range(5):
        handles.append(producer.task_for("limitsapp.screen_a").with_options(queue="shared").delay("s", 0.2))
        handles.append(producer.task_for("limitsapp.screen_b").with_options(queue="shared").delay("s", 0.2))
    frees = [producer.task_for("limitsapp.free").with_options(queue="shared").delay("f") for _ in range(5)]
    assert all(final(h, timeout=60) is JobState.SUCCEEDED for h in handles + frees)
    assert all(h.info().attempts == 1 for h in handles)  # held back, never failed or retried
    runs = spans(side, "s")
    assert len(runs) == 10 and most_at_once(runs) == 1, runs
    # The unlimited task of the same queue was not held behind the limit: done before the last screen started.
    assert max(end for _, end in spans(side, "f")) < max(start for start, _ in runs)


def test_a_shared_rate_limit_bounds_the_starts_of_both_tasks(start_worker, redis_url: str, side) -> None:
    producer = TaskForge("producer", broker=redis_url)
    both_up(producer, [start_worker("-c", "4", "-q", "shared", app=LIMITS)])  # its limits published
    handles = []
    for _ in range(6):
        handles.append(producer.task_for("limitsapp.ping_a").with_options(queue="shared").delay("p"))
        handles.append(producer.task_for("limitsapp.ping_b").with_options(queue="shared").delay("p"))
    assert all(final(h, timeout=60) is JobState.SUCCEEDED for h in handles)
    # The limit counts claims, on Redis's clock: each record's started_at. (A child's own clock at the
    # body's start is later by however long the loaded machine took to get there, unevenly.)
    starts = sorted(h.info().started_at.timestamp() for h in handles)  # type: ignore[union-attr]
    # "4/s": no 5 starts within one second, so 12 jobs take at least two seconds.
    assert all(starts[i + 4] - starts[i] >= 0.999 for i in range(len(starts) - 4)), starts
