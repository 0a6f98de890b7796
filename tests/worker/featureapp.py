"""Periodic, unique, rate- and concurrency-limited tasks, for tests/worker/test_features.py."""

import os
import time

import redis

from taskforge import TaskForge, current_job

app = TaskForge("featureapp")
side = redis.Redis.from_url(os.environ["SIDE_REDIS"])


@app.periodic(every=1)
def every_second():
    side.rpush("side:ticks", current_job().id)


@app.task(unique_for=8)
def unique_sleep(key, seconds):
    side.rpush(f"side:{key}", current_job().id)
    time.sleep(seconds)


@app.task(unique=True)
def unique_once(key):
    side.rpush(f"side:{key}", current_job().id)


@app.task(rate_limit="10/s", queue="limited")
def limited(key):
    side.rpush(f"side:{key}", current_job().id)


@app.task(queue="limited")
def unlimited(key):
    side.rpush(f"side:{key}", repr(time.time()))


@app.task(concurrency=2, queue="limited", max_attempts=3, backoff=0.05)
def narrow(key, crash=False):
    # Runs counted here, not by attempt: a crashed run is a worker loss and refunds its attempt.
    number = side.incr(f"side:{key}:runs:{current_job().id}")
    run = f"{current_job().id}:{number}"
    side.rpush(f"side:{key}:start", f"{run} {time.time()!r}")
    # The queue's own record of who runs: the crashed run stays in it until its crash is recorded.
    side.rpush(f"side:{key}:active", app.broker.client.scard("taskforge:{limited}:active:featureapp.narrow"))
    if crash and number == 1:
        os._exit(9)
    time.sleep(0.3)
    side.rpush(f"side:{key}:end", f"{run} {time.time()!r}")


@app.task
def forever(key):
    side.rpush(f"side:{key}", os.getpid())
    time.sleep(600)
