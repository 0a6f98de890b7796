"""The app the scaling-out tests run in real workers (load.py enqueues to twenty queues).

The broker comes from TASKFORGE_BROKER_URL; SCALED_DURABILITY picks the
durability, so producer and workers agree.
"""

import os
import time

from taskforge import TaskForge

app = TaskForge("scaled", durability=os.environ.get("SCALED_DURABILITY", "async"))


@app.task(name="scaled.work", queue="q00", max_attempts=5, backoff=0.1)
def work(n: int, pause: float = 0.0) -> int:
    if pause:
        time.sleep(pause)
    return n


@app.task(name="scaled.doomed", queue="q00", max_attempts=1)
def doomed(n: int) -> None:
    raise ValueError(f"doomed {n}")
