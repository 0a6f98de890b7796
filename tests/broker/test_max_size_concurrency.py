"""max_size holds under concurrent producers: the check and the insert are one script.

Eight processes, each with its own app and connection, enqueue at the same
moment into a queue bounded at 357: exactly that many jobs are stored and
every other call raises QueueFull, never a job more, never a job lost. The
bound is above what one process can store alone (50 calls of at most 7
jobs), so several must fill it however the scheduler orders them: a fast
enough enqueue once let the first process fill a bound of 100 by itself.
"""

from __future__ import annotations

import multiprocessing
import queue as stdlib_queue
from typing import Any

import pytest

from taskforge import QueueFull, TaskForge
from tests.conftest import admin_client

pytestmark = pytest.mark.redis

PROCESSES = 8
TRIES = 50
MAX_SIZE = 357  # > TRIES * 7: no single producer can fill it
QUEUE = "bounded"


def producer(url: str, barrier: Any, results: Any, index: int, batch: int) -> None:
    """One producer process: wait for the others, then enqueue TRIES times as fast as it can."""
    try:
        app = TaskForge(f"producer-{index}", broker=url, max_size=MAX_SIZE)

        @app.task(name="bounded.job", queue=QUEUE)
        def job(*n):
            return n

        app.broker.ping()  # connect before the start line, so all race on the enqueue itself
        stored, full = [], 0
        barrier.wait(timeout=60)
        for attempt in range(TRIES):
            try:
                if batch == 1:
                    stored.append(job.delay(index, attempt).id)
                else:
                    stored += [h.id for h in job.delay_many([(index, attempt, i) for i in range(batch)])]
            except QueueFull:
                full += 1
        results.put((index, stored, full, None))
    except BaseException as exc:  # report, never hang the parent
        results.put((index, [], 0, repr(exc)))


@pytest.mark.parametrize("batch", [1, 7], ids=["delay", "delay_many-of-7"])
def test_eight_processes_never_overshoot_max_size(redis_url: str, batch: int) -> None:
    """With batches of 7 only whole batches fit: 51 of them, 357 jobs, and no partial batch."""
    expected = MAX_SIZE // batch * batch
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(PROCESSES)
    results = context.Queue()
    procs = [
        context.Process(target=producer, args=(redis_url, barrier, results, i, batch), daemon=True)
        for i in range(PROCESSES)
    ]
    for proc in procs:
        proc.start()
    reports = []
    try:
        for _ in procs:
            reports.append(results.get(timeout=90))
    except stdlib_queue.Empty:
        pytest.fail(f"only {len(reports)} of {PROCESSES} producers reported within 90 s")
    finally:
        for proc in procs:
            proc.join(timeout=10)
            if proc.is_alive():
                proc.kill()
                proc.join(timeout=5)

    errors = [(index, error) for index, _, _, error in reports if error]
    assert not errors, errors
    stored = [job_id for _, ids, _, _ in reports for job_id in ids]
    full = sum(count for _, _, count, _ in reports)
    assert len(stored) == expected, f"{len(stored)} jobs stored with max_size={MAX_SIZE}"
    assert len(set(stored)) == expected
    assert full == PROCESSES * TRIES - expected // batch, "every other call must raise QueueFull"
    # More than one process got a slot (the bound guarantees it): they wrote side by side.
    assert sum(1 for _, ids, _, _ in reports if ids) > 1

    client = admin_client(redis_url)
    prefix = f"taskforge:{{{QUEUE}}}:"
    assert client.zcard(prefix + "pending") == expected
    assert client.zcard(prefix + "scheduled") == client.zcard(prefix + "running") == 0
    assert {m.decode() for m in client.zrange(prefix + "pending", 0, -1)} == set(stored)
    assert len(list(client.scan_iter(match=prefix + "job:*", count=1000))) == expected
    client.close()
