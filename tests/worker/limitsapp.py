"""Tasks sharing named limits (app.limit), for tests/worker/test_named_limits.py."""

import os
import time

import redis

from taskforge import TaskForge

app = TaskForge("limitsapp")
side = redis.Redis.from_url(os.environ["SIDE_REDIS"])

app.limit("screens", concurrency=1)
app.limit("pings", rate="4/s")


def span(key, seconds):
    """The run's start and end, on the side Redis's clock (one clock for every worker)."""
    t = side.time()
    start = t[0] + t[1] / 1e6
    time.sleep(seconds)
    t = side.time()
    side.rpush(f"side:{key}", f"{start!r} {t[0] + t[1] / 1e6!r}")


@app.task(queue="shared", limits=["screens"])
def screen_a(key, seconds):
    span(key, seconds)


@app.task(queue="shared", limits=["screens"], concurrency=5)
def screen_b(key, seconds):
    span(key, seconds)


@app.task(queue="shared", limits=["pings"])
def ping_a(key):
    span(key, 0)


@app.task(queue="shared", limits=["pings"])
def ping_b(key):
    span(key, 0)


@app.task(queue="shared")
def free(key):
    span(key, 0)
