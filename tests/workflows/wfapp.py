"""The workflow tests' user app: run by real ``taskforge worker`` processes and drained in-process.

The worker imports it as ``tests.workflows.wfapp`` from the repository root,
the tests import it under the same name, so task names agree. Tasks that
must leave a trace record it in the side Redis (``SIDE_REDIS``) under
``wfside:<key>``; the pure ones (``add``, ``mul``, ``total``...) touch
nothing, so they also run on ``memory://`` without any Redis.

Queues: ``wf``, ``wf-img``, ``wf-low`` are served by the tests' worker;
``wf-manual`` never is, so a test can claim its jobs by hand.
"""

from __future__ import annotations

import functools
import os
from typing import Any

import redis

from taskforge import TaskForge

app = TaskForge("wfapp", broker=os.environ.get("TASKFORGE_BROKER_URL", "memory://"))
SERVED = ("wf", "wf-img", "wf-low")
MANUAL = "wf-manual"
GATE_TIMEOUT = 30  # seconds a gated task waits before giving up, so no run outlives its test


@functools.cache
def side() -> redis.Redis:
    return redis.Redis.from_url(os.environ["SIDE_REDIS"])


def side_key(key: str) -> str:
    return f"wfside:{key}"


@app.task(queue="wf")
def add(x: int, y: int) -> int:
    return x + y


@app.task(queue="wf")
def mul(x: int, y: int) -> int:
    return x * y


@app.task(queue="wf")
def total(values: list[int]) -> int:
    return sum(values)


@app.task(queue="wf")
def ident(value: Any) -> Any:
    return value


@app.task(queue="wf")
def const(value: Any) -> Any:
    """One argument only: in a chain it fails unless called through ``.si()``."""
    return value


@app.task(queue="wf")
def mark(value: Any, key: str) -> Any:
    """Record that this step ran, and with what it was called."""
    side().rpush(side_key(key), repr(value))
    return value


@app.task(queue="wf", max_attempts=1)
def boom(value: Any, key: str) -> None:
    side().rpush(side_key(key), repr(value))
    raise ValueError(f"boom after {value!r}")


@app.task(queue="wf", max_attempts=3, backoff=0.05)
def flaky(value: Any, key: str) -> None:
    """Fails on every attempt: ends dead after its own retries."""
    side().rpush(side_key(key), repr(value))
    raise RuntimeError("flaky never works")


@app.task(queue="wf", max_attempts=1)
def boom_once_started(value: Any, key: str, started: str) -> None:
    """Fails only once the task gated on ``started`` is running, so that one is mid-run when the workflow dies."""
    if side().blpop([side_key(started)], timeout=GATE_TIMEOUT) is None:
        raise TimeoutError(f"nothing started on {started!r}")
    side().rpush(side_key(key), repr(value))
    raise ValueError("boom while a sibling runs")


@app.task(queue="wf", max_attempts=1)
def gated(value: Any, gate: str, started: str = "") -> Any:
    """Runs until the test (or a sibling step) pushes to ``<gate>:open``; says when it started."""
    if started:
        side().rpush(side_key(started), "started")
    side().rpush(side_key(f"{gate}:running"), "started")
    if side().blpop([side_key(f"{gate}:open")], timeout=GATE_TIMEOUT) is None:
        raise TimeoutError(f"gate {gate!r} never opened")
    side().rpush(side_key(f"{gate}:order"), "gated")
    return value


@app.task(queue="wf", max_attempts=1)
def opener(value: Any, gate: str) -> Any:
    """Opens ``gate``: the gated sibling before it in a group can only finish after this one."""
    side().rpush(side_key(f"{gate}:order"), "opener")
    side().rpush(side_key(f"{gate}:open"), "1")
    return value


@app.task(queue="wf", max_attempts=1)
def refuse(value: Any) -> None:
    """Fails without touching any Redis, for workflows drained on ``memory://``."""
    raise ValueError(f"refused {value!r}")


@app.task(queue="wf", max_attempts=1)
def fails_until_fixed(value: Any, key: str) -> Any:
    """Fails until the test sets ``<key>:fixed`` (a bug fixed), then returns its value: a step worth retrying."""
    side().rpush(side_key(key), repr(value))
    if not side().exists(side_key(f"{key}:fixed")):
        raise ValueError(f"not fixed yet: {value!r}")
    return value


FIXED: set[str] = set()  # for runs in this very process (app.drain()): a key here fixes refuse_until


@app.task(queue="wf", max_attempts=1)
def refuse_until(value: Any, key: str) -> Any:
    """``fails_until_fixed`` without the side Redis, for workflows drained in-process."""
    if key not in FIXED:
        raise ValueError(f"refused {value!r} until fixed")
    return value


@app.task(queue="wf", max_attempts=1)
def fails_once_started_until_fixed(value: Any, key: str, started: str) -> Any:
    """``fails_until_fixed``, once the task gated on ``started`` runs: that sibling is mid-run when it dies."""
    if side().blpop([side_key(started)], timeout=GATE_TIMEOUT) is None:
        raise TimeoutError(f"nothing started on {started!r}")
    return fails_until_fixed(value, key)
