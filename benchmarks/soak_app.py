"""The app the soak benchmark's worker runs: one no-op task, and a retention short enough to wait out."""

import os

from taskforge import TaskForge

RETENTION = float(os.environ.get("SOAK_RETENTION", "3"))

app = TaskForge("soak", retention=RETENTION, dead_retention=RETENTION)


@app.task(name="soak.noop", queue="soak")
def noop(n=None):
    return None
