"""The user app the worker tests run; copied into a temp directory as userapp.py."""

import os
import signal
import time

import redis

from taskforge import LeaseLost, Retry, TaskForge, current_job

app = TaskForge("userapp")
side = redis.Redis.from_url(os.environ["SIDE_REDIS"])


@app.on("worker_started")
@app.on("worker_stopping")
@app.on("job_dead")
def remember(event):
    side.rpush("side:events", f"{event.name} {event.job.task if event.job else '-'}")


@app.middleware
def tag(job, call_next):
    if job.task.endswith("tagged"):
        side.rpush("side:tagged", f"before {job.attempts}")
    return call_next()


@app.task
def tagged():
    return "ok"


@app.task
def record(key, value=1):
    side.rpush(f"side:{key}", value)
    return value


@app.task
def record_pid(key):
    side.rpush(f"side:{key}", os.getpid())


@app.task(max_attempts=3, backoff=0.05)
def crash_once(key):
    if side.incr(f"side:{key}:runs") == 1:
        os._exit(13)
    side.rpush(f"side:{key}", "ok")
    return "survived"


@app.task(max_attempts=3, backoff=0.05)
def stepwise(key):
    """Two durable steps; the child is SIGKILLed inside the second on its first run."""
    job = current_job()

    def first():
        side.incr(f"side:{key}:one")
        return "first"

    def second():
        if side.incr(f"side:{key}:two") == 1:
            os.kill(os.getpid(), signal.SIGKILL)
        return "second"

    return [job.step("one", first), job.step("two", second)]


@app.task(max_attempts=1)
def napper(key, seconds):
    """A step, a durable sleep, a step: the worker is free while it sleeps."""
    job = current_job()
    before = job.step("before", lambda: side.incr(f"side:{key}:before"))
    job.sleep(seconds)
    side.rpush(f"side:{key}:woke", time.time())
    return [before, job.step("after", lambda: "after")]


@app.task(max_attempts=3)
def fenced_steps(key):
    """Step one; on its first run, wait (frozen by the test, overtaken) before step two and a stream item."""
    job = current_job()
    run = side.incr(f"side:{key}:runs")  # not job.attempt: a run lost with its worker refunds its attempt
    one = job.step("one", lambda: side.incr(f"side:{key}:one"))
    if run == 1:
        side.set(f"side:{key}:waiting", 1)
        while not side.exists(f"side:{key}:go"):
            time.sleep(0.05)
    refused = []
    for name, write in (
        ("stream", lambda: job.stream(f"run {run}")),
        ("step", lambda: job.step(f"two of run {run}", str)),
    ):
        try:
            write()
        except LeaseLost:
            refused.append(name)
    if refused:
        side.set(f"side:{key}:refused", " ".join(refused))
        raise LeaseLost("overtaken")
    return [one, run]


@app.task
def narrator(key, items):
    """Streams ``items`` items, each only once the reader of the test saw the one before (``side:<key>:seen``)."""
    job = current_job()
    for n in range(items):
        deadline = time.monotonic() + 30
        while int(side.get(f"side:{key}:seen") or 0) < n and time.monotonic() < deadline:
            time.sleep(0.01)
        job.stream({"n": n})
    return items


@app.task(max_attempts=2, backoff=0.05)
def always_crash(key):
    side.incr(f"side:{key}:runs")
    os._exit(3)


@app.task(max_attempts=3)
def sleepy(key, seconds):
    side.rpush(f"side:{key}:started", os.getpid())
    time.sleep(seconds)
    side.rpush(f"side:{key}", "done")
    return seconds


@app.task(max_attempts=3)
def spin(key, seconds):
    """Holds the GIL the whole time: a heartbeat thread inside this process would starve."""
    side.rpush(f"side:{key}:started", os.getpid())
    end = time.monotonic() + seconds
    n = 0
    while time.monotonic() < end:
        n += 1
    side.rpush(f"side:{key}", "done")
    return n > 0


@app.task(timeout=1, max_attempts=2, backoff=0.05)
def too_slow(key):
    side.incr(f"side:{key}:runs")
    time.sleep(30)


@app.task(max_attempts=3, backoff=0.05)
def retry_me(key):
    if side.incr(f"side:{key}:runs") < 3:
        raise Retry(after=0.05)
    return "third time"


@app.task
def returns_object():
    return object()


@app.task(priority="high")
def urgent(key):
    side.rpush(f"side:{key}", "urgent")


@app.task
def stamp(key):
    side.rpush(f"side:{key}", repr(time.time()))


@app.task
def nothing(n):
    """A run as short as a run gets (no side effect): what auto batching grows on even on a busy machine."""
    return n


@app.task
def queued(name, seconds=0.0):
    """Says when it starts, in one list for every job: the order the worker started them."""
    side.rpush("side:order", name)
    time.sleep(seconds)
    side.rpush("side:ended", name)
    return name


@app.task(max_attempts=1)
def waits_for(key):
    """Runs until ``opens(key)`` has run: a job that needs another job of its batch to run meanwhile."""
    if side.blpop([f"side:{key}:open"], timeout=4) is None:  # under the side client's socket timeout
        raise TimeoutError(f"{key} never opened")
    return "opened"


@app.task
def opens(key):
    side.rpush(f"side:{key}:open", 1)


@app.task(key="name", debounce=0.5)
def debounced(name, value):
    """Says each run: a burst of calls per name must run once, with the burst's last value."""
    side.rpush(f"side:debounced:{name}", value)


@app.task(key="account")
def keyed(account):
    """Says which key's job started, in one list for every job: the order keys got their turns."""
    side.rpush("side:keyed", account)


@app.task(key="account", key_concurrency=2)
def keyed_span(account, seconds):
    """Runs a while (seconds, or until the side key named by a string is set); a key may have two at once."""
    if isinstance(seconds, str):
        deadline = time.monotonic() + 120
        while not side.get(seconds) and time.monotonic() < deadline:
            time.sleep(0.05)
        return
    time.sleep(seconds)


@app.task(key="account", key_rate_limit="4/s")
def keyed_rated(account):
    return account


@app.task(max_attempts=1)
def slow_first(key, seconds):
    """No retries; its first run takes ``seconds`` (long enough to be killed or stopped), the next ones none."""
    runs = side.incr(f"side:{key}:runs")
    side.rpush(f"side:{key}:started", os.getpid())
    if runs == 1:
        time.sleep(seconds)
    return runs


@app.task(max_attempts=1)
def kills_its_child(key):
    side.incr(f"side:{key}:runs")
    os.kill(os.getpid(), signal.SIGKILL)


@app.task(max_attempts=5)
def kills_its_child_often(key):
    side.incr(f"side:{key}:runs")
    os._exit(9)
