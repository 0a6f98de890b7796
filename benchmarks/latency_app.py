"""The app the latency benchmark's worker runs: a task that records when it started."""

import os
import time

import redis

from taskforge import TaskForge

app = TaskForge("bench")
side = redis.Redis.from_url(os.environ["BENCH_SIDE_REDIS"])


@app.task
def stamp(n):
    started = time.time()
    side.rpush("bench:started", f"{n} {started!r}")
