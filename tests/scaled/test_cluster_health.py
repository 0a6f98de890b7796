"""A Redis Cluster: the server check asks every master, and queue probes and forgets run in each queue's slot."""

from __future__ import annotations

import pytest

from taskforge import TaskForge, status
from taskforge.broker import server_health
from taskforge.forgetting import forget_queue

pytestmark = [pytest.mark.redis, pytest.mark.slow]


def test_the_server_check_asks_every_master(cluster) -> None:
    app = TaskForge("health", broker=cluster.url)
    healths = server_health.check_servers(app.broker.client, app.url)
    assert len(healths) == 3 and all(h.server and h.run_id for h in healths)
    assert all(h.replicas == 1 and h.policy == "noeviction" for h in healths)
    summary, _ = status.server_report(app)
    assert len(summary) == 3


def test_probe_and_forget_over_three_masters(cluster) -> None:
    app = TaskForge("probe", broker=cluster.url)
    queues = ["q02", "q08", "q14"]  # three slots
    for queue in queues:
        app.broker.cleanup.clear(queue)
    send = app.task(name="probe.one")(lambda n: n)
    send.with_options(queue="q02").delay(1)
    send.with_options(queue="q08").delay(2)
    app.broker.cleanup.purge("q08", "pending")
    found = {q.name: q for q in status.status(app, queues).queues}
    assert found["q02"].pending == 1 and found["q08"].pending == 0 and found["q14"].pending == 0
    assert forget_queue(app, "q08") == 0  # the purge left nothing
    assert forget_queue(app, "q14") == 0
    app.broker.cleanup.clear("q02")
