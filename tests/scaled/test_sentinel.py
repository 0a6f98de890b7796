"""Redis Sentinel: jobs through the master Sentinel names, and through a SIGKILLed master."""

from __future__ import annotations

import time

import pytest
import redis

from taskforge import status

from .load import producer, results, spread, through_failover
from .senders import sending
from .servers import HOST, client, wait_until

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


def replica_again(port: int) -> float:
    """Once the node at ``port`` replicates the new master: when that was.

    Up to 60 s: the sentinels reconfigure the old master, then it syncs; on a loaded 2-core machine the
    two took over 30 s once (the test alone, a second later, took 25 s for all four cases)."""
    wait_until(lambda: client(port).info("replication").get("master_link_status") == "up", 60, "a replica again")
    return time.monotonic()


def test_producers_made_before_a_failover_send_to_the_new_master(sentinel) -> None:
    """Sync and async, plain and replicated: every send goes through, those after it to the new master.

    A thread's own connection for the hot scripts (``broker/direct.py``)
    once connected again to the address it had, the dead master's, for the
    30 s an enqueue retries, then raised ``BrokerUnavailable``.
    """
    heir = sentinel.standby()
    victim = sentinel.current_master()
    with sending(sentinel.url) as senders:
        sentinel.kill(victim)
        wait_until(lambda: sentinel.current_master() == heir, 30, "the sentinels to promote the replica")
        promoted = time.monotonic()
        # The old master stays down a while: plain enqueues go on to the new one meanwhile.
        senders.wait_for(senders.plain, promoted)
        # Back as a replica: replicated enqueues, which waited for one to confirm them, go on.
        sentinel.restart(victim, "--replicaof", HOST, str(heir))
        whole = replica_again(victim)
        senders.wait_for(senders.all, whole)
    checked = {s.name: (promoted if s in senders.plain else whole) for s in senders.all}
    senders.check_all(checked, heir, sentinel.data_nodes)


def test_producers_made_before_a_coordinated_failover_send_to_the_new_master(sentinel) -> None:
    """``SENTINEL FAILOVER``: the old master lives on as a replica, its scripts loaded, and answers READONLY."""
    heir = sentinel.standby()
    old = sentinel.current_master()
    with sending(sentinel.url) as senders:
        # NOGOODSLAVE while the replica still catches up (seen on a loaded machine): asked again.
        wait_until(lambda: coordinated_failover(sentinel), 30, "the sentinels to accept SENTINEL FAILOVER")
        wait_until(lambda: sentinel.current_master() == heir, 30, "the sentinels to promote the replica")
        whole = replica_again(old)
        senders.wait_for(senders.all, whole)
    senders.check_all({s.name: whole for s in senders.all}, heir, sentinel.data_nodes)


def coordinated_failover(sentinel) -> bool:
    """Ask for ``SENTINEL FAILOVER``; False while no replica is fit to promote yet."""
    try:
        client(sentinel.sentinels[0]).execute_command("SENTINEL", "FAILOVER", sentinel.SERVICE)
    except redis.ResponseError as exc:
        if "NOGOODSLAVE" not in str(exc):
            raise
        return False
    return True
