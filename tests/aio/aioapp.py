"""The app a real worker runs for the async producer's tests: plain sync tasks."""

from __future__ import annotations

import time

from taskforge import TaskForge

app = TaskForge("aioapp")


@app.task(name="aioapp.slow")
def slow(seconds: float, value: int) -> int:
    time.sleep(seconds)
    return value
