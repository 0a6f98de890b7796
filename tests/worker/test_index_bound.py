"""A worker keeps the search index as small as the records it names (issue: the index grew without bound).

At 1,000 jobs/s with ``retention=5`` the records stayed near 6,000 while the
index grew by 1,700 entries a second: the old sweep took 500 entries per
reclaim, and an idle worker reclaims every 5 s. This test asks only what a
user sees, with the public API and a real worker: once the records of
thousands of finished jobs have expired, a worker started afterwards leaves
no index entry of theirs behind within a few of its ticks.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import redis

from taskforge import TaskForge
from taskforge.broker.keys import search_index
from tests.worker.conftest import Worker, wait_for

JOBS = 5_000
RETENTION = 1.0

APP = """
from taskforge import TaskForge

app = TaskForge("indexapp", retention=1.0)


@app.task
def noop(n):
    return n
"""


def test_the_index_entries_of_expired_records_are_gone_within_a_few_worker_ticks(
    workdir: Path, redis_url: str, start_worker: Callable[..., Worker]
) -> None:
    (workdir / "indexapp.py").write_text(APP)
    app = TaskForge("indexapp", broker=redis_url, retention=RETENTION)

    @app.task
    def noop(n: int) -> int:
        return n

    noop.delay_many([(i,) for i in range(JOBS)])
    assert len(app.drain(max_jobs=JOBS)) == JOBS
    client = redis.Redis.from_url(redis_url)
    index = search_index("default")
    assert client.zcard(index) >= JOBS  # a 't' entry for each job, at least
    time.sleep(RETENTION + 0.2)  # every record has expired; its entries have not
    worker = start_worker("-c", "1", app="indexapp:app")
    # An idle worker reclaims at start and then every 5 s: the old sweep took
    # 500 entries each time at best (10,000 entries: 100 s; 4889e4b's never
    # took them); the sweep that keeps the index flat takes them all within
    # its first ticks, which a machine at load 50 stretched past 12 s.
    wait_for(lambda: client.zcard(index) == 0, 40, f"the index to empty (at {client.zcard(index)})", interval=0.2)
    assert worker.proc.poll() is None, worker.output()
