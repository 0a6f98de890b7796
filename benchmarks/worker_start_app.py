"""The app ``worker_start.py`` starts a worker for: one task, which writes when its body began."""

from __future__ import annotations

import os
import time

from taskforge import TaskForge

app = TaskForge("start", broker=os.environ["START_REDIS"])


@app.task()
def mark() -> None:
    """Write the wall time the body began to $START_MARK (the worker's stderr would be buffered)."""
    began = time.time()
    with open(os.environ["START_MARK"], "w", encoding="utf-8") as out:
        out.write(repr(began))
