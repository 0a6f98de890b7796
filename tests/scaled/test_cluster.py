"""Redis Cluster: twenty queues over three masters, real workers, a master SIGKILLed mid-run."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pytest

from taskforge import TaskForge, status
from taskforge.broker.keys import QueueKeys

from .load import QUEUES, producer, results, spread, through_failover
from .servers import client, wait_until

pytestmark = [pytest.mark.redis, pytest.mark.slow]


def test_twenty_queues_over_every_master_run_by_three_workers(cluster, start_worker, tmp_path) -> None:
    app, work, doomed = producer(cluster.url)
    masters = set(cluster.masters())
    assert len(masters) == 3
    assert {cluster.master_of(QueueKeys(q).pending) for q in QUEUES} == masters

    handles = spread(work, 200, pause=0.05)  # long enough that no worker drains them all before the last starts
    dead = doomed.with_options(queue="q07").delay(7)
    work.with_options(queue="q13").apply_in(3600, 13)
    workers = [start_worker(cluster.url, "-c", "2", "--burst") for _ in range(3)]
    for worker in workers:
        assert worker.wait(90) == 0, worker.output()[-3000:]
    assert results(handles, timeout=30) == list(range(200))
    assert all("succeeded" in w.output() for w in workers), "every worker ran jobs"

    # Cross-queue views over all nodes, without multi-slot commands.
    by_name = {q.name: q for q in status.status(app).queues}
    assert set(QUEUES) <= set(by_name)
    assert (by_name["q07"].dead, by_name["q13"].scheduled, by_name["q00"].pending) == (1, 1, 0)
    assert [info.id for info in status.dead_jobs(app)] == [dead.id]
    env = {**os.environ, "TASKFORGE_BROKER_URL": cluster.url}
    for command in (["purge", "scaledapp:app", "--yes"], ["dead", "scaledapp:app", "purge", "--yes"]):
        done = subprocess.run(
            [sys.executable, "-m", "taskforge", *command],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
    assert app.broker.inspection.counts("q13")["scheduled"] == 0 and app.broker.inspection.counts("q07")["dead"] == 0


def test_an_idle_wait_over_every_master_wakes_for_a_job_on_any_of_them(cluster) -> None:
    app, work, _ = producer(cluster.url)
    waiting = ["another-queue", *QUEUES]
    for queue in waiting:  # wake-up tokens left by earlier tests
        app.broker.cleanup.clear(queue)
    assert app.broker.claims.wait_for_work(waiting, 0.05) is False
    for master in cluster.masters():
        queue = next(q for q in QUEUES if cluster.master_of(QueueKeys(q).pending) == master)
        woken: list[bool] = []

        def wait(into: list[bool] = woken) -> None:
            into.append(app.broker.claims.wait_for_work(waiting, 30))

        waiter = threading.Thread(target=wait)
        waiter.start()
        time.sleep(0.1)
        work.with_options(queue=queue).delay(0)
        waiter.join(timeout=60)
        # Each pop blocks 1 s at most: without the wake-up the wait would end False.
        assert woken == [True], f"no wake-up from {queue} on the master at port {master}"
        app.broker.cleanup.clear(queue)


def test_killed_master_fails_over_and_work_goes_on(cluster, start_worker) -> None:
    app, _, _ = producer(cluster.url)
    workers = [start_worker(cluster.url, "-c", "2", durability="replicated") for _ in range(2)]
    wait_until(lambda: len(status.workers(app)) == 2, 30, "both workers in the registry")
    victim = cluster.master_of(QueueKeys(QUEUES[0]).pending)

    def recover() -> None:
        wait_until(
            lambda: victim not in cluster.masters() and len(cluster.masters()) == 3,
            30,
            "a replica to take over the killed master's slots",
        )
        cluster.restart(victim)  # it rejoins as a replica of its replacement
        wait_until(lambda: client(victim).info("replication")["role"] == "slave", 30, "the old master to rejoin")

    stalled = through_failover(cluster.url, lambda: cluster.kill(victim), recover)
    print(f"cluster failover: longest enqueue {stalled:.2f} s")
    wait_until(cluster.healthy, 30, "the cluster to be whole again")
    assert all(w.proc.poll() is None for w in workers), "workers kept running through the failover"


def test_fair_turns_and_a_key_cap_in_one_slot_of_the_cluster(cluster) -> None:
    app = TaskForge("fair", broker=cluster.url)

    @app.task(queue="q05", key="account", key_concurrency=1)
    def keyed(account: str, n: int) -> None: ...

    app.broker.cleanup.clear("q05")
    keyed.delay_many([("big", n) for n in range(50)])
    keyed.delay("small", 0)
    claims = app.broker.claims
    assert [c.args for c in claims.dequeue("q05", 60_000, count=5).claims] == [("big", 0), ("small", 0)]
    assert claims.dequeue("q05", 60_000, count=5).claims == []  # "big" at its cap: held, not failed
    assert app.broker.flow.held("q05") == 49
    assert app.broker.inspection.counts("q05")["pending"] == 49
    app.broker.cleanup.clear("q05")


def test_finding_jobs_and_a_bulk_retry_over_three_masters(cluster) -> None:
    """Each queue's index lives in its queue's slot: a search merges queues on different masters by stamp."""
    from taskforge import bulk, search

    app = TaskForge("finder", broker=cluster.url)
    queues = ["q01", "q07", "q13"]  # three slots
    for queue in queues:
        app.broker.cleanup.clear(queue)
    sent = []
    for n in range(9):
        sent.append(app.task_for("finder.job").with_options(queue=queues[n % 3], max_attempts=1).delay(n))
        time.sleep(0.002)
    page = app.find_jobs(task="finder.job", limit=4)
    assert [j.id for j in page.jobs] == [h.id for h in reversed(sent)][:4] and page.cursor
    rest = app.find_jobs(task="finder.job", limit=10, cursor=page.cursor)
    assert [j.id for j in rest.jobs] == [h.id for h in reversed(sent)][4:] and rest.cursor is None
    for queue in queues:
        for claim in app.broker.claims.dequeue(queue, 60_000, count=5).claims:
            assert app.broker.claims.fail(queue, claim.id, claim.token, "boom", "", None) == "dead"
    assert bulk.apply(app, search.query(app, state="dead", task="finder.job"), "retry") == 9
    assert {h.status().value for h in sent} == {"pending"}
    assert bulk.apply(app, search.query(app, task="finder.job"), "cancel") == 9
    assert bulk.apply(app, search.query(app, task="finder.job"), "delete") == 9
    assert app.find_jobs(task="finder.job").jobs == []
    for queue in queues:
        app.broker.cleanup.clear(queue)
