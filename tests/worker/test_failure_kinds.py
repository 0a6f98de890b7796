"""The failure kinds a real worker records: one ``taskforge worker`` process, every way a run can fail.

The child records an exception, a retry request, an unknown task and an
unstorable result itself; the supervisor records a timeout and a crash for a
child it had to kill or saw die. Each must reach the record (``JobInfo``),
``TaskFailed.kind`` and the ``job_failed`` hook (``event.failure``).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import redis

from taskforge import TaskFailed, TaskForge
from taskforge.job import FailureKind
from tests.worker.conftest import wait_for

pytestmark = [pytest.mark.redis, pytest.mark.slow]

FAIL_APP = """
import os
import time

import redis

from taskforge import Retry, TaskForge

app = TaskForge("failapp")
side = redis.Redis.from_url(os.environ["SIDE_REDIS"])


@app.on("job_failed")
def seen(event):
    side.rpush("side:failed", f"{event.job.id} {event.failure} {event.job.failure}")


@app.task(name="boom", max_attempts=1)
def boom():
    raise ValueError("boom")


@app.task(name="again", max_attempts=2)
def again():
    raise Retry(after=0)


@app.task(name="slow", max_attempts=1, timeout=1)
def slow():
    time.sleep(60)


@app.task(name="crash", max_attempts=1, max_worker_losses=0)
def crash():
    os._exit(3)


@app.task(name="unstorable", max_attempts=1)
def unstorable():
    return object()
"""

# task sent -> (its kind, the start of its error text, how many job_failed events it gives)
EXPECTED = {
    "boom": (FailureKind.EXCEPTION, "ValueError: boom", 1),
    "again": (FailureKind.RETRY, "Retry: ", 2),
    "slow": (FailureKind.TIMEOUT, "TimeoutError: ", 1),
    "crash": (FailureKind.WORKER_LOST, "WorkerLost: ", 1),  # max_worker_losses=0: its first crash is its end
    "unstorable": (FailureKind.SERIALIZATION, "SerializationError: ", 1),
    "nobody": (FailureKind.UNKNOWN_TASK, "UnknownTask: ", 1),
}


def test_each_way_a_run_fails_is_recorded_with_its_kind(
    start_worker, workdir: Path, redis_url: str, side: redis.Redis
) -> None:
    (workdir / "failapp.py").write_text(FAIL_APP)
    producer = TaskForge("producer", broker=redis_url)
    handles = {name: producer.send(name) for name in EXPECTED}
    worker = start_worker("-c", "1", "--no-periodic", app="failapp:app")
    for name, (kind, error, _) in EXPECTED.items():
        with pytest.raises(TaskFailed) as caught:
            handles[name].result(timeout=60)
        failed = caught.value
        assert failed.kind is kind, f"{name}: {failed.kind} ({failed.error}); worker log:\n{worker.output()}"
        assert failed.error is not None and failed.error.startswith(error), (name, failed.error)
        info = handles[name].info()
        assert info.failure is kind and info.to_dict()["failure"] == kind.value
    # A job_failed hook runs just after its failure is recorded: the last may still be on its way.
    expected = sum(count for _, _, count in EXPECTED.values())
    wait_for(lambda: side.llen("side:failed") >= expected, 30, f"{expected} job_failed events")
    events = [line.decode().split() for line in side.lrange("side:failed", 0, -1)]
    for name, (kind, _, count) in EXPECTED.items():
        seen = [rest for job_id, *rest in events if job_id == handles[name].id]
        assert seen == [[kind.value, kind.value]] * count, (name, seen)
