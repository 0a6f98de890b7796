"""``error_type`` from a real worker: the class path of what ended each run, and it imports.

One ``taskforge worker`` process with one child, every way a run can fail:
the child records the task's own exception (a builtin, a class of the
user's module, ``Retry(exc=err)``, ``SystemExit`` / ``KeyboardInterrupt``
in a sync lane and in an async task) and the errors it meets itself; the
supervisor records a timeout kill and a crash. Each must reach the
record's ``error_type`` field, ``JobInfo.error_type`` and
``TaskFailed.error_type``, name a class that ``import`` finds, and a task
raising ``SystemExit`` must leave its child alive and its traceback kept.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest
import redis

from taskforge import TaskFailed, TaskForge
from taskforge.broker.keys import QueueKeys

pytestmark = [pytest.mark.redis, pytest.mark.slow]

APP = """
import asyncio
import os
import time

from taskforge import Retry, TaskForge, current_job

app = TaskForge("typeapp")


class PaymentDeclined(Exception):
    pass


@app.task(name="boom", max_attempts=1)
def boom():
    raise ValueError("boom")


@app.task(name="declined", max_attempts=1)
def declined():
    raise PaymentDeclined("card 42")


@app.task(name="asked", max_attempts=1)
def asked():
    try:
        {}["missing"]
    except KeyError as err:
        raise Retry(after=0, exc=err)


@app.task(name="exits", max_attempts=1)
def exits():
    raise SystemExit(3)


@app.task(name="interrupted", max_attempts=1)
def interrupted():
    raise KeyboardInterrupt()


@app.task(name="aexits", max_attempts=1)
async def aexits():
    await asyncio.sleep(0)
    raise SystemExit("async exit")


@app.task(name="ainterrupted", max_attempts=1)
async def ainterrupted():
    raise KeyboardInterrupt()


@app.task(name="soft", max_attempts=1, soft_timeout=0.5, timeout=30)
def soft():
    time.sleep(20)


@app.task(name="slow", max_attempts=1, timeout=1)
def slow():
    time.sleep(60)


@app.task(name="crash", max_attempts=1, max_worker_losses=0)
def crash():
    os._exit(3)


@app.task(name="unstorable", max_attempts=1)
def unstorable():
    return object()


@app.task(name="pid")
def pid():
    return os.getpid()


@app.task(name="apid")
async def apid():
    return os.getpid()


@app.task(name="counting")
def counting():
    current_job().set_progress(0.3, "fetching", meta={"done": 3, "total": 10})
    return "ok"
"""

# task sent -> (its error_type, the start of its error text, a word its traceback holds or None)
EXPECTED = {
    "boom": ("builtins.ValueError", "ValueError: boom", "ValueError"),
    "declined": ("typeapp.PaymentDeclined", "PaymentDeclined: card 42", "PaymentDeclined"),
    "asked": ("builtins.KeyError", "KeyError: 'missing'", "KeyError"),
    "exits": ("builtins.SystemExit", "SystemExit: 3", "SystemExit"),
    "interrupted": ("builtins.KeyboardInterrupt", "KeyboardInterrupt", "KeyboardInterrupt"),
    "aexits": ("builtins.SystemExit", "SystemExit: async exit", "SystemExit"),
    "ainterrupted": ("builtins.KeyboardInterrupt", "KeyboardInterrupt", "KeyboardInterrupt"),
    "soft": ("taskforge.errors.SoftTimeout", "SoftTimeout", "SoftTimeout"),
    "slow": ("taskforge.errors.HardTimeout", "TimeoutError: ", None),
    "crash": ("taskforge.errors.WorkerLost", "WorkerLost: ", None),  # max_worker_losses=0: dead at its first crash
    "unstorable": ("taskforge.errors.SerializationError", "SerializationError: ", None),
    "nobody": ("taskforge.errors.UnknownTask", "UnknownTask: ", None),
}


def resolve(path: str, workdir: Path) -> type:
    """The class a dotted path names, imported as a program reading error_type would."""
    module, _, name = path.rpartition(".")
    sys.path.insert(0, str(workdir))
    try:
        value = importlib.import_module(module)
        for part in name.split("."):
            value = getattr(value, part)
    finally:
        sys.path.remove(str(workdir))
        sys.modules.pop("typeapp", None)
    assert isinstance(value, type) and issubclass(value, BaseException), path
    return value


def test_each_failure_records_the_class_path_of_its_error(
    start_worker, workdir: Path, redis_url: str, side: redis.Redis
) -> None:
    (workdir / "typeapp.py").write_text(APP)
    producer = TaskForge("producer", broker=redis_url)
    worker = start_worker("-c", "1", "--no-periodic", app="typeapp:app")
    before = producer.send("pid").result(timeout=60)
    abefore = producer.send("apid").result(timeout=60)
    # The sync and async SystemExit / KeyboardInterrupt first: the same child must outlive them.
    for name in ("exits", "interrupted", "aexits", "ainterrupted"):
        with pytest.raises(TaskFailed):
            producer.send(name).result(timeout=60)
    assert producer.send("pid").result(timeout=60) == before, worker.output()
    assert producer.send("apid").result(timeout=60) == abefore, worker.output()
    for name, (error_type, error, word) in EXPECTED.items():
        handle = producer.send(name)
        with pytest.raises(TaskFailed) as caught:
            handle.result(timeout=60)
        failed = caught.value
        assert failed.error_type == error_type, f"{name}: {failed.error_type} ({failed.error}):\n{worker.output()}"
        assert failed.error is not None and failed.error.startswith(error), (name, failed.error)
        info = handle.info()
        assert info.error_type == error_type and info.to_dict()["error_type"] == error_type
        raw = side.hget(QueueKeys("default").job(handle.id), "error_type")
        assert raw == error_type.encode(), (name, raw)
        if word is not None:
            assert info.traceback is not None and word in info.traceback, (name, info.traceback)
        resolve(error_type, workdir)
    done = producer.send("counting")
    assert done.result(timeout=60) == "ok"
    info = done.info()
    assert (info.progress, info.progress_message, info.progress_meta) == (0.3, "fetching", {"done": 3, "total": 10})
