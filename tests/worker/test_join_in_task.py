"""A blocking join inside a task run by a real worker is refused, saying why; ``allow_join=True`` waits.

With ``-c 1`` a task waiting for another job's result holds the only slot
that job could run in: it waits forever. The join raises ``RuntimeError``
at once instead, so the job fails with a message naming workflows and
``allow_join``. The joins here have a short timeout, so that without the
rule they fail fast (``TimeoutError``) rather than hang the test.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from taskforge import JobState, TaskForge

from .conftest import final

pytestmark = [pytest.mark.redis, pytest.mark.slow]

APP = """
import asyncio

from taskforge import TaskForge, group

app = TaskForge("joinapp")
WAIT = 3


@app.task(name="add", max_attempts=1)
def add(a, b):
    return a + b


@app.task(name="joiner", max_attempts=1)
def joiner():
    return add.delay(1, 2).result(timeout=WAIT)


@app.task(name="getter", max_attempts=1)
def getter():
    return add.delay(1, 2).get(timeout=WAIT)


@app.task(name="gather", max_attempts=1)
def gather():
    return group(add.s(1, 1), add.s(2, 2)).delay().result(timeout=WAIT)


@app.task(name="ajoiner", max_attempts=1)
async def ajoiner():
    await asyncio.sleep(0)
    return await add.delay(1, 2).aresult(timeout=WAIT)


@app.task(name="peek", max_attempts=1)
def peek():
    handle = add.delay(1, 2)
    try:
        return handle.result(timeout=0)  # a read that does not wait is no join
    except TimeoutError:
        return "not yet"


@app.task(name="allowed", max_attempts=1)
def allowed():
    return add.delay(2, 3).result(timeout=30, allow_join=True)


@app.task(name="aallowed", max_attempts=1)
async def aallowed():
    return await add.delay(3, 3).aresult(timeout=30, allow_join=True)
"""


@pytest.fixture
def joinapp(workdir: Path) -> str:
    (workdir / "joinapp.py").write_text(APP)
    return "joinapp:app"


def test_a_join_inside_a_task_fails_the_job_saying_why(start_worker, joinapp: str, redis_url: str) -> None:
    producer = TaskForge("producer", broker=redis_url)
    worker = start_worker("-c", "1", "--no-periodic", app=joinapp)
    for name in ("joiner", "getter", "gather", "ajoiner"):
        handle = producer.send(name)
        assert final(handle, timeout=60) is JobState.DEAD, worker.output()
        error = handle.info().error or ""
        assert error.startswith("RuntimeError: "), (name, error)
        assert "allow_join=True" in error and "chain" in error and "deadlock" in error, (name, error)
    assert producer.send("peek").result(timeout=60) in (3, "not yet")


def test_allow_join_waits_for_the_value(start_worker, joinapp: str, redis_url: str) -> None:
    producer = TaskForge("producer", broker=redis_url)
    worker = start_worker("-c", "2", "--no-periodic", app=joinapp)
    assert producer.send("allowed").result(timeout=60) == 5, worker.output()
    assert producer.send("aallowed").result(timeout=60) == 6, worker.output()
