"""The fault suite's user app; copied into a temp directory as faultapp.py.

Its broker is ``TASKFORGE_BROKER_URL`` (a fault proxy in front of the test's
private Redis); every run is recorded straight into that Redis (``FAULT_SIDE``,
not through the proxy), with Redis's own clock, so the checks compare times
on one clock whatever the worker's (libfaketime) says::

    faults:runs            list  JSON {id, token, attempt, worker, at (Redis ms)} per run started
    faults:hook:succeeded  list  "job-id firing-nonce" per job_succeeded hook
    faults:hook:failed     list  "job-id firing-nonce" per job_failed hook

A hook's entry is pushed until that Redis answers: the hook may run just as
the crash scenario kills it, and a lost entry would read as a hook that never
fired. A push whose reply was lost may land twice; the nonce tells one firing
written twice from two firings.
    faults:ticks           list  JSON {id, worker, at} per periodic run
"""

import asyncio
import json
import os
import time
import uuid

import redis

from taskforge import TaskForge, current_job

app = TaskForge("faultapp", durability=os.environ.get("FAULT_DURABILITY", "async"))
side = redis.Redis.from_url(os.environ["FAULT_SIDE"])
WORKER = os.environ.get("FAULT_WORKER", "producer")
TICK_EVERY = float(os.environ.get("FAULT_TICK_EVERY", "0") or 0)


def redis_ms() -> int:
    seconds, micros = side.time()
    return int(seconds) * 1000 + int(micros) // 1000


def _record(token):
    job = current_job()
    entry = {"id": job.id, "token": token, "attempt": job.attempt, "worker": WORKER, "at": redis_ms()}
    side.rpush("faults:runs", json.dumps(entry))


@app.task(max_attempts=20, backoff=0.2)
def work(token, seconds=0.0):
    _record(token)
    if seconds:
        import time

        time.sleep(seconds)
    return token


@app.task(max_attempts=20, backoff=0.2)
async def awork(token, seconds=0.0):
    _record(token)
    if seconds:
        await asyncio.sleep(seconds)
    return token


@app.task(max_attempts=20, backoff=0.2)
def add(total, value):
    _record(f"step:{current_job().id}")
    return total + value


def _push_until_answered(key, value, patience=60.0):
    deadline = time.monotonic() + patience
    while True:
        try:
            side.rpush(key, value)
            return
        except (redis.ConnectionError, redis.TimeoutError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


@app.on("job_succeeded")
def _succeeded(event):
    _push_until_answered("faults:hook:succeeded", f"{event.job.id} {uuid.uuid4().hex}")


@app.on("job_failed")
def _failed(event):
    _push_until_answered("faults:hook:failed", f"{event.job.id} {uuid.uuid4().hex}")


if TICK_EVERY:

    @app.periodic(every=TICK_EVERY)
    def tick():
        side.rpush("faults:ticks", json.dumps({"id": current_job().id, "worker": WORKER, "at": redis_ms()}))
