"""Redis Sentinel: jobs through the master Sentinel names, and through a SIGKILLed master."""

from __future__ import annotations

import pytest

from taskforge import status

from .load import producer, results, spread, through_failover
from .servers import client, wait_until

pytestmark = [pytest.mark.redis, pytest.mark.slow]


def test_jobs_run_through_the_master_sentinel_names(sentinel, start_worker) -> None:
    app, work, _ = producer(sentinel.url, durability="replicated")
    handles = spread(work, 40)
    assert client(sentinel.standby()).dbsize() > 0, "replicated durability: the replica has the jobs"
    worker = start_worker(sentinel.url, "-c", "2", "--burst")
    assert worker.wait(60) == 0, worker.output()[-3000:]
    assert results(handles, timeout=30) == list(range(40))
    assert sum(q.pending for q in status.status(app).queues) == 0


def test_killed_master_fails_over_and_work_goes_on(sentinel, start_worker) -> None:
    app, _, _ = producer(sentinel.url)
    workers = [start_worker(sentinel.url, "-c", "2", durability="replicated") for _ in range(2)]
    wait_until(lambda: len(status.workers(app)) == 2, 30, "both workers in the registry")
    heir = sentinel.standby()
    victim = sentinel.current_master()

    def recover() -> None:
        wait_until(lambda: sentinel.current_master() == heir, 30, "the sentinels to promote the replica")
        # As an operator would: the sentinels would also make it a replica,
        # but only some 10 s after seeing it back as a master.
        sentinel.restart(victim, "--replicaof", "127.0.0.1", str(heir))
        wait_until(
            lambda: client(victim).info("replication").get("master_link_status") == "up",
            30,
            "the old master to replicate from the new one",
        )

    stalled = through_failover(sentinel.url, lambda: sentinel.kill(victim), recover)
    print(f"sentinel failover: longest enqueue {stalled:.2f} s")
    assert all(w.proc.poll() is None for w in workers), "workers kept running through the failover"
