"""``status`` over many queues: a queue found empty by ``queue_probe`` shows what the full read shows."""

from __future__ import annotations

import time

from taskforge import TaskForge, status
from taskforge.broker.keys import QueueKeys
from taskforge.broker.queue_probe import QueueProbe


def test_the_probe_agrees_with_the_full_read_of_every_queue(app: TaskForge) -> None:
    @app.task(queue="busy")
    def busy(n: int) -> int:
        return n

    busy.delay(1)
    busy.with_options(key="k", priority="high").delay(2)
    busy.apply_in(60, 3)
    busy.with_options(queue="keyed-only", key="k").delay(4)
    busy.with_options(queue="later").apply_in(60, 5)
    busy.with_options(queue="emptied").delay(6)
    app.broker.cleanup.purge("emptied", "pending")
    app.pause("paused-empty")
    client = app.broker.client
    second = int(client.time()[0]) % 60
    if second > 45:  # the stats written below and both reads must fall in one minute
        time.sleep(61 - second)
    minute = int(client.time()[0]) // 60
    # Expiries in the last hour, one of them 40 minutes ago, one older than the hour.
    for ago, n in ((0, 2), (40, 3), (61, 100)):
        client.hset(QueueKeys("expired-only").stats(minute - ago), "expired", n)
    for m in range(60):  # a busy hour: every minute counted
        client.hset(QueueKeys("busy-hour").stats(minute - m), "expired", 1)
    names = ["busy", "keyed-only", "later", "emptied", "paused-empty", "expired-only", "busy-hour", "never"]

    probed = {q.name: q for q in status.status(app, names).queues}
    full = {name: status.queue_status(app, name) for name in names}
    assert probed == full
    assert probed["expired-only"].expired_last_hour == 5 and probed["busy-hour"].expired_last_hour == 60
    assert probed["paused-empty"].paused and probed["keyed-only"].pending == 1
    found = QueueProbe(app.broker.link).probe(names)
    assert {n for n, p in found.items() if p.jobs} == {"busy", "keyed-only", "later"}
