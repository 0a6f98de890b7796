"""The chaos test's user app; copied into a temp directory as chaosapp.py.

Every task takes a ``token`` chosen by the producer, unique per enqueue call,
and records each run in the side Redis (never the queue's own Redis, which
the test kills and pauses)::

    <prefix>runs:<token>   list   "<pid>:<ppid>:<time>" when a run starts
    <prefix>ends:<token>   list   "<pid>:<time>:<outcome>" when it ends (ok | raise | crash)
    <prefix>busy           hash   child pid -> "<token>/<task>" it is running now (for the fault driver)
    <prefix>imports        list   "<pid>:<ppid>:<time>" each time a process imports this app: a
                                  worker child must have its supervisor as parent when it does

Workflow steps (the ``wf_*`` tasks) take no token: their job id
(``<workflow>.<index>``) names them, and each run also records its attempt,
so a step stored twice shows as attempt 1 twice::

    <prefix>step:<job id>      list   "<pid>:<ppid>:<time>:<attempt>" when a run starts
    <prefix>stepends:<job id>  list   "<pid>:<time>:<outcome>" when it ends (ok | raise)

Retry decisions count runs in the side Redis, so a run cut short by a fault
counts like any other.

Each plain task has an ``async def`` twin named ``aio_<name>`` that does the
same through redis.asyncio and ``asyncio.sleep``: the worker runs those on
its children's event loops, beside the sync lanes, through the same faults.
"""

import asyncio
import os
import time

import redis
import redis.asyncio

from taskforge import Retry, TaskForge, current_job

app = TaskForge("chaosapp")
side = redis.Redis.from_url(os.environ["CHAOS_SIDE_REDIS"])
PREFIX = os.environ["CHAOS_PREFIX"]
side.rpush(f"{PREFIX}imports", f"{os.getpid()}:{os.getppid()}:{time.time():.6f}")

# Generous, so only the injected faults (never bad luck) could exhaust them
# (attempts, and the worker losses the kills cost);
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


# Used only on a child's event loop (one per child), created on first use there.
_aside: redis.asyncio.Redis | None = None


def _async_side() -> redis.asyncio.Redis:
    global _aside
    if _aside is None:
        _aside = redis.asyncio.Redis.from_url(os.environ["CHAOS_SIDE_REDIS"])
    return _aside


async def _astart(token, task):
    """_start for async tasks; "busy" names the child's latest async job (the fault driver only leans on it)."""
    pid = os.getpid()
    pipe = _async_side().pipeline(transaction=False)
    pipe.rpush(f"{PREFIX}runs:{token}", f"{pid}:{os.getppid()}:{time.time():.6f}")
    pipe.hset(f"{PREFIX}busy", str(pid), f"{token}/{task}")
    return (await pipe.execute())[0]


async def _aend(token, outcome):
    """_end for async tasks: other async jobs of this child may still run, so "busy" stays."""
    await _async_side().rpush(f"{PREFIX}ends:{token}", f"{os.getpid()}:{time.time():.6f}:{outcome}")


@app.task(max_attempts=PATIENT, max_worker_losses=PATIENT, backoff=0.1)
def quick(token):
    _start(token, "quick")
    _end(token, "ok")
    return token


@app.task(max_attempts=PATIENT, max_worker_losses=PATIENT, backoff=0.1)
def slow(token, seconds):
    _start(token, "slow")
    time.sleep(seconds)
    _end(token, "ok")
    return token


@app.task(max_attempts=PATIENT, max_worker_losses=PATIENT, backoff=0.1)
def long(token, seconds):
    """Outlasts the workers' 2 s grace period: a SIGTERM gives it back to the queue unfinished."""
    _start(token, "long")
    time.sleep(seconds)
    _end(token, "ok")
    return token


@app.task(max_attempts=PATIENT, max_worker_losses=PATIENT, backoff=0.1)
def flaky(token, fails):
    """Raises on its first ``fails`` runs, then succeeds."""
    if _start(token, "flaky") <= fails:
        _end(token, "raise")
        raise RuntimeError(f"flaky {token}: failing on purpose")
    _end(token, "ok")
    return token


@app.task(max_attempts=PATIENT, max_worker_losses=PATIENT)
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


@app.task(max_attempts=PATIENT, max_worker_losses=PATIENT, backoff=0.1)
def crash_once(token):
    """Kills its own child process on the first run."""
    if _start(token, "crash_once") == 1:
        _end(token, "crash")
        os._exit(13)
    _end(token, "ok")
    return token


# At most KEY_CAP runs of one account at once across every worker (checked from the runs' records).
KEY_CAP = 2


@app.task(key="account", key_concurrency=KEY_CAP, max_attempts=PATIENT, max_worker_losses=PATIENT, backoff=0.1)
def keyed(token, account, seconds):
    """A job with a key and a per-key cap: fair turns and key_concurrency through the faults."""
    _start(token, "keyed")
    time.sleep(seconds)
    _end(token, "ok")
    return token


# A limit shared by screen_a, screen_b and their async twins: at most SHARED_CAP of them run at
# once across every worker, whichever task (checked from the runs' records).
SHARED_CAP = 2
app.limit("screens", concurrency=SHARED_CAP)


@app.task(limits=["screens"], max_attempts=PATIENT, max_worker_losses=PATIENT, backoff=0.1)
def screen_a(token, seconds):
    """One of two tasks sharing the "screens" limit (app.limit): named limits through the faults."""
    _start(token, "screen_a")
    time.sleep(seconds)
    _end(token, "ok")
    return token


@app.task(limits=["screens"], max_attempts=PATIENT, max_worker_losses=PATIENT, backoff=0.1)
def screen_b(token, seconds):
    """The other task sharing "screens"."""
    _start(token, "screen_b")
    time.sleep(seconds)
    _end(token, "ok")
    return token


@app.task(key="account", max_attempts=PATIENT, max_worker_losses=PATIENT, backoff=0.1)
def turns(token, account):
    """A job with a key and no limits: it waits in the main pending set at its key's turn."""
    _start(token, "turns")
    _end(token, "ok")
    return token


@app.task(queue="bulk", priority="low", max_attempts=PATIENT, max_worker_losses=PATIENT, backoff=0.1)
def bulk(token):
    """On a second queue, so workers serve two queues round-robin."""
    _start(token, "bulk")
    _end(token, "ok")
    return token


# A durable job: three steps, each streaming an item from inside it, an item streamed after
# each step (outside it: streamed again by every run that gets there), and a durable sleep
# before the last step.  Side records, beside the runs and ends above:
#
#   <prefix>dsteps:<token>   list   "start:<n>:<run>:<time>" / "end:<n>:<run>:<time>" around a
#                                   step's work; "kept:<n>:<value>:<run>:<time>" once step()
#                                   returned (<value>: the run whose result is stored)
#   <prefix>dstream:<token>  list   each item, once job.stream() returned for it
DURABLE_STEPS = 3


def _durable_work(job, token, n, run):
    side.rpush(f"{PREFIX}dsteps:{token}", f"start:{n}:{run}:{time.time():.6f}")
    _streamed(job, token, f"{run}:in{n}")
    time.sleep(0.03)  # long enough that faults find steps running
    side.rpush(f"{PREFIX}dsteps:{token}", f"end:{n}:{run}:{time.time():.6f}")
    return run


def _streamed(job, token, item):
    job.stream(item)
    side.rpush(f"{PREFIX}dstream:{token}", item)


@app.task(max_attempts=PATIENT, max_worker_losses=PATIENT, backoff=0.1)
def durable(token, nap):
    run = _start(token, "durable")
    job = current_job()
    for n in range(DURABLE_STEPS):
        if n == DURABLE_STEPS - 1 and nap:
            try:
                job.sleep(nap)
            except BaseException:  # the durable sleep ends this run (Slept): recorded as such
                _end(token, "slept")
                raise
        kept = job.step(f"s{n}", _durable_work, job, token, n, run)
        side.rpush(f"{PREFIX}dsteps:{token}", f"kept:{n}:{kept}:{run}:{time.time():.6f}")
        _streamed(job, token, f"{run}:after{n}")
    _end(token, "ok")
    return token


# -- the async twins: the same designs, on the children's event loops ---------------


@app.task(max_attempts=PATIENT, max_worker_losses=PATIENT, backoff=0.1)
async def aio_quick(token):
    await _astart(token, "aio_quick")
    await _aend(token, "ok")
    return token


@app.task(key="account", key_concurrency=KEY_CAP, max_attempts=PATIENT, max_worker_losses=PATIENT, backoff=0.1)
async def aio_keyed(token, account, seconds):
    await _astart(token, "aio_keyed")
    await asyncio.sleep(seconds)
    await _aend(token, "ok")
    return token


@app.task(key="account", max_attempts=PATIENT, max_worker_losses=PATIENT, backoff=0.1)
async def aio_turns(token, account):
    await _astart(token, "aio_turns")
    await _aend(token, "ok")
    return token


@app.task(max_attempts=PATIENT, max_worker_losses=PATIENT, backoff=0.1)
async def aio_slow(token, seconds):
    await _astart(token, "aio_slow")
    await asyncio.sleep(seconds)
    await _aend(token, "ok")
    return token


@app.task(max_attempts=PATIENT, max_worker_losses=PATIENT, backoff=0.1)
async def aio_long(token, seconds):
    await _astart(token, "aio_long")
    await asyncio.sleep(seconds)
    await _aend(token, "ok")
    return token


@app.task(max_attempts=PATIENT, max_worker_losses=PATIENT, backoff=0.1)
async def aio_flaky(token, fails):
    if await _astart(token, "aio_flaky") <= fails:
        await _aend(token, "raise")
        raise RuntimeError(f"aio_flaky {token}: failing on purpose")
    await _aend(token, "ok")
    return token


@app.task(max_attempts=PATIENT, max_worker_losses=PATIENT)
async def aio_polite(token, fails):
    if await _astart(token, "aio_polite") <= fails:
        await _aend(token, "raise")
        raise Retry(after=0.2)
    await _aend(token, "ok")
    return token


@app.task(max_attempts=3, backoff=0.05)
async def aio_doomed(token):
    await _astart(token, "aio_doomed")
    await _aend(token, "raise")
    raise ValueError(f"aio_doomed {token}: always fails")


@app.task(limits=["screens"], max_attempts=PATIENT, max_worker_losses=PATIENT, backoff=0.1)
async def aio_screen_a(token, seconds):
    await _astart(token, "aio_screen_a")
    await asyncio.sleep(seconds)
    await _aend(token, "ok")
    return token


@app.task(limits=["screens"], max_attempts=PATIENT, max_worker_losses=PATIENT, backoff=0.1)
async def aio_screen_b(token, seconds):
    await _astart(token, "aio_screen_b")
    await asyncio.sleep(seconds)
    await _aend(token, "ok")
    return token


@app.task(max_attempts=PATIENT, max_worker_losses=PATIENT, backoff=0.1)
async def aio_crash_once(token):
    """Kills its child on the first run: every other job of that child, async or sync, goes down with it."""
    if await _astart(token, "aio_crash_once") == 1:
        await _aend(token, "crash")
        os._exit(13)
    await _aend(token, "ok")
    return token


async def _adurable_work(job, token, n, run):
    aside = _async_side()
    await aside.rpush(f"{PREFIX}dsteps:{token}", f"start:{n}:{run}:{time.time():.6f}")
    job.stream(f"{run}:in{n}")
    await aside.rpush(f"{PREFIX}dstream:{token}", f"{run}:in{n}")
    await asyncio.sleep(0.03)
    await aside.rpush(f"{PREFIX}dsteps:{token}", f"end:{n}:{run}:{time.time():.6f}")
    return run


@app.task(max_attempts=PATIENT, max_worker_losses=PATIENT, backoff=0.1)
async def aio_durable(token, nap):
    """``durable`` through astep and asleep."""
    run = await _astart(token, "aio_durable")
    job = current_job()
    aside = _async_side()
    for n in range(DURABLE_STEPS):
        if n == DURABLE_STEPS - 1 and nap:
            try:
                await job.asleep(nap)
            except BaseException:
                await _aend(token, "slept")
                raise
        kept = await job.astep(f"s{n}", _adurable_work, job, token, n, run)
        await aside.rpush(f"{PREFIX}dsteps:{token}", f"kept:{n}:{kept}:{run}:{time.time():.6f}")
        job.stream(f"{run}:after{n}")
        await aside.rpush(f"{PREFIX}dstream:{token}", f"{run}:after{n}")
    await _aend(token, "ok")
    return token


@app.task(queue="bulk", priority="low", max_attempts=PATIENT, max_worker_losses=PATIENT, backoff=0.1)
async def aio_bulk(token):
    await _astart(token, "aio_bulk")
    await _aend(token, "ok")
    return token


# -- workflow steps ------------------------------------------------------------------


# A step's work: long enough that faults find steps running (not only the slow plain jobs),
# short enough that 200 workflows add little to the run.
STEP_SECONDS = 0.05


def _step_start(task):
    """Record this run of a step under its job id; returns its job id and how many runs it has had."""
    job = current_job()
    pid = os.getpid()
    pipe = side.pipeline(transaction=False)
    pipe.rpush(f"{PREFIX}step:{job.id}", f"{pid}:{os.getppid()}:{time.time():.6f}:{job.attempt}")
    pipe.hset(f"{PREFIX}busy", str(pid), f"{job.id}/{task}")
    runs = pipe.execute()[0]
    time.sleep(STEP_SECONDS)
    return job.id, runs


def _step_end(job_id, outcome):
    pid = os.getpid()
    pipe = side.pipeline(transaction=False)
    pipe.rpush(f"{PREFIX}stepends:{job_id}", f"{pid}:{time.time():.6f}:{outcome}")
    pipe.hdel(f"{PREFIX}busy", str(pid))
    pipe.execute()


@app.task(max_attempts=PATIENT, max_worker_losses=PATIENT, backoff=0.1)
def wf_add(total, value):
    """A chain step: the total it receives plus its own value, so a lost or doubled step shows in the sum."""
    job_id, _ = _step_start("wf_add")
    _step_end(job_id, "ok")
    return total + value


@app.task(max_attempts=PATIENT, max_worker_losses=PATIENT, backoff=0.1)
def wf_flaky(total, value, fails):
    """A chain step that raises on its first ``fails`` runs: a retried step must not send its successor early."""
    job_id, runs = _step_start("wf_flaky")
    if runs <= fails:
        _step_end(job_id, "raise")
        raise RuntimeError(f"wf_flaky {job_id}: failing on purpose")
    _step_end(job_id, "ok")
    return total + value


@app.task(max_attempts=PATIENT, max_worker_losses=PATIENT, backoff=0.1)
def wf_sum(values, extra):
    """A group's follow-up (a chord): the members' results, summed, plus its own value."""
    job_id, _ = _step_start("wf_sum")
    _step_end(job_id, "ok")
    return sum(values) + extra


@app.task(max_attempts=1)
def wf_doom(total):
    """Always raises, with no retry: its workflow ends dead and runs its on_failure."""
    job_id, _ = _step_start("wf_doom")
    _step_end(job_id, "raise")
    raise ValueError(f"wf_doom {job_id}: always fails")


@app.task(max_attempts=PATIENT, max_worker_losses=PATIENT, backoff=0.1)
def wf_alert(tag):
    """The on_failure step of the workflows that contain a wf_doom."""
    job_id, _ = _step_start("wf_alert")
    _step_end(job_id, "ok")
    return tag
