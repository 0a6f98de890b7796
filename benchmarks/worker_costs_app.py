"""The app ``worker_costs.py`` runs: a no-op task, and one that records when the first job started."""

import os
import time

import redis

from taskforge import TaskForge

app = TaskForge("costs", os.environ["COSTS_REDIS"])
side = redis.Redis.from_url(os.environ["COSTS_REDIS"])


@app.task
def noop(n):
    return None


@app.task
def stamp(n):
    side.set("costs:first", repr(time.time()), nx=True)


@app.task(key="k")
def keyed(n, k):
    return None
