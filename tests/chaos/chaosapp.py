"""The chaos test's user app; copied into a temp directory as chaosapp.py.

Every task takes a ``token`` chosen by the producer, unique per enqueue call,
and records each run in the side Redis (never the queue's own Redis, which
the test kills and pauses)::

    <prefix>runs:<token>   list   "<pid>:<ppid>:<time>" when a run starts
    <prefix>ends:<token>   list   "<pid>:<time>:<outcome>" when it ends (ok | raise | crash)
    <prefix>busy           hash   child pid -> "<token>/<task>" it is running now (for the fault driver)
    <prefix>imports        list   "<pid>:<ppid>:<time>" each time a process imports this app: a
                                  worker child must have its supervisor as parent when it does

Retry decisions count runs in the side Redis, so a run cut short by a fault
counts like any other.
"""

import os
import time

import redis

from taskforge import Retry, TaskForge

app = TaskForge("chaosapp")
side = redis.Redis.from_url(os.environ["CHAOS_SIDE_REDIS"])
PREFIX = os.environ["CHAOS_PREFIX"]
side.rpush(f"{PREFIX}imports", f"{os.getpid()}:{os.getppid()}:{time.time():.6f}")

# Generous, so only the injected faults (never bad luck) could exhaust them;
# a well-behaved job that ends dead is a failure of the test.
PATIENT = 12


def _start(token, task):
    pid = os.getpid()
    pipe = side.pipeline(transaction=False)
    pipe.rpush(f"{PREFIX}runs:{token}", f"{pid}:{os.getppid()}:{time.time():.6f}")
    pipe.hset(f"{PREFIX}busy", str(pid), f"{token}/{task}")
    return pipe.execute()[0]


def _end(token, outcome):
    pid = os.getpid()
    pipe = side.pipeline(transaction=False)
    pipe.rpush(f"{PREFIX}ends:{token}", f"{pid}:{time.time():.6f}:{outcome}")
    pipe.hdel(f"{PREFIX}busy", str(pid))
    pipe.execute()


@app.task(max_attempts=PATIENT, backoff=0.1)
def quick(token):
    _start(token, "quick")
    _end(token, "ok")
    return token


@app.task(max_attempts=PATIENT, backoff=0.1)
def slow(token, seconds):
    _start(token, "slow")
    time.sleep(seconds)
    _end(token, "ok")
    return token


@app.task(max_attempts=PATIENT, backoff=0.1)
def long(token, seconds):
    """Outlasts the workers' 2 s grace period: a SIGTERM gives it back to the queue unfinished."""
    _start(token, "long")
    time.sleep(seconds)
    _end(token, "ok")
    return token


@app.task(max_attempts=PATIENT, backoff=0.1)
def flaky(token, fails):
    """Raises on its first ``fails`` runs, then succeeds."""
    if _start(token, "flaky") <= fails:
        _end(token, "raise")
        raise RuntimeError(f"flaky {token}: failing on purpose")
    _end(token, "ok")
    return token


@app.task(max_attempts=PATIENT)
def polite(token, fails):
    """Asks for a retry (raise Retry) on its first ``fails`` runs."""
    if _start(token, "polite") <= fails:
        _end(token, "raise")
        raise Retry(after=0.2)
    _end(token, "ok")
    return token


@app.task(max_attempts=3, backoff=0.05)
def doomed(token):
    """Always raises: dead after 3 attempts."""
    _start(token, "doomed")
    _end(token, "raise")
    raise ValueError(f"doomed {token}: always fails")


@app.task(max_attempts=PATIENT, backoff=0.1)
def crash_once(token):
    """Kills its own child process on the first run."""
    if _start(token, "crash_once") == 1:
        _end(token, "crash")
        os._exit(13)
    _end(token, "ok")
    return token


@app.task(queue="bulk", priority="low", max_attempts=PATIENT, backoff=0.1)
def bulk(token):
    """On a second queue, so workers serve two queues round-robin."""
    _start(token, "bulk")
    _end(token, "ok")
    return token
