"""The app the scaling-out tests run in real workers (load.py enqueues to twenty queues).

The broker comes from TASKFORGE_BROKER_URL; SCALED_DURABILITY picks the
durability, so producer and workers agree.
"""

import os
import time

from taskforge import TaskForge, current_job

app = TaskForge("scaled", durability=os.environ.get("SCALED_DURABILITY", "async"))


@app.task(name="scaled.work", queue="q00", max_attempts=5, backoff=0.1)
def work(n: int, pause: float = 0.0) -> int:
    if pause:
        time.sleep(pause)
    return n


@app.task(name="scaled.doomed", queue="q00", max_attempts=1)
def doomed(n: int) -> None:
    raise ValueError(f"doomed {n}")


def note_run() -> None:
    """Append "job-id attempt" to the file SCALED_RUNS names: the workflow tests count each step's runs.

    A file rather than a Redis key: a failover may drop a write the killed
    master acknowledged, and the count is what the test checks.
    """
    path = os.environ.get("SCALED_RUNS")
    if path:
        job = current_job()
        with open(path, "a") as runs:
            runs.write(f"{job.id} {job.attempt}\n")


@app.task(name="scaled.trail", queue="q00", max_attempts=5, backoff=0.1)
def trail(path: list[str], label: str, pause: float = 0.0) -> list[str]:
    """A workflow step: ``path`` plus ``label@queue``, so a result shows which step ran where, in what order."""
    note_run()
    if pause:
        time.sleep(pause)
    return [*path, f"{label}@{current_job().queue}"]


@app.task(name="scaled.gather", queue="q00", max_attempts=5, backoff=0.1)
def gather(parts: list[list[str]], label: str) -> list[str]:
    """A chord's follow-up: its members' paths, in member order, then its own label."""
    note_run()
    return [*(step for part in parts for step in part), f"{label}@{current_job().queue}"]
