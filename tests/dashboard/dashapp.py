"""The app the dashboard tests serve and a real worker runs; copied into a temp directory."""

import os
import time

import redis

from taskforge import TaskForge, current_job

app = TaskForge("dashapp")
side = redis.Redis.from_url(os.environ["SIDE_REDIS"])


@app.task(max_attempts=2, backoff=0.05)
def add(a, b):
    return a + b


@app.task(max_attempts=1)
def fails_first(key):
    """Dead after its first run; succeeds when retried from the dashboard."""
    if side.incr(f"side:{key}") == 1:
        raise ValueError(f"first run of {key} fails on purpose")
    return f"{key} recovered"


@app.task
def slow(seconds):
    current_job().set_progress(0.5, "halfway")
    time.sleep(seconds)
    return seconds


@app.task(queue="backlog")
def later(n):
    return n


@app.periodic(every=3600)
def hourly_report():
    return "report"
