"""The producer side of the scaling-out tests: twenty queues, and a run through a failover."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from taskforge import JobHandle, TaskForge

QUEUES = [f"q{i:02d}" for i in range(20)]


def producer(url: str, durability: str = "async") -> tuple[TaskForge, Any, Any]:
    """An app whose tasks carry the names ``scaledapp`` registers, so its workers run them."""
    app = TaskForge("scaled", broker=url, durability=durability)

    @app.task(name="scaled.work", queue=QUEUES[0], max_attempts=5)
    def work(n: int, pause: float = 0.0) -> int:
        raise AssertionError("runs in the workers")

    @app.task(name="scaled.doomed", queue=QUEUES[0], max_attempts=1)
    def doomed(n: int) -> None:
        raise AssertionError("runs in the workers")

    return app, work, doomed


def spread(work: Any, count: int, pause: float = 0.0) -> list[JobHandle[int]]:
    """``count`` jobs dealt round-robin over the twenty queues; job i returns i."""
    return [work.with_options(queue=QUEUES[i % len(QUEUES)]).delay(i, pause) for i in range(count)]


def results(handles: list[JobHandle[int]], timeout: float) -> list[int]:
    deadline = time.monotonic() + timeout
    return [h.result(timeout=max(0.1, deadline - time.monotonic())) for h in handles]


def through_failover(url: str, kill: Callable[[], None], recover: Callable[[], None], total: int = 240) -> float:
    """Enqueue ``total`` jobs steadily, SIGKILL a master a third of the way, bring the node back.

    Asserts that every enqueue returned (none raised: each was retried through
    the switch), and that every acknowledged job ran to success. Returns the
    longest single enqueue, in seconds: how long producers stalled.
    """
    app, work, _ = producer(url, durability="replicated")
    handles: list[JobHandle[int]] = []
    errors: list[BaseException] = []
    slowest = [0.0]

    def produce() -> None:
        for i in range(total):
            started = time.monotonic()
            try:
                handles.append(work.with_options(queue=QUEUES[i % len(QUEUES)]).delay(i, 0.005))
            except BaseException as exc:  # the assertion below reports it
                errors.append(exc)
                return
            slowest[0] = max(slowest[0], time.monotonic() - started)
            time.sleep(0.01)

    thread = threading.Thread(target=produce, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while len(handles) < total // 3 and time.monotonic() < deadline and thread.is_alive():
        time.sleep(0.01)
    kill()
    recover()
    thread.join(timeout=120)
    assert not thread.is_alive(), "the producer did not finish within 120 s"
    assert not errors, f"an enqueue failed through the failover: {errors[0]!r}"
    assert len(handles) == total
    assert results(handles, timeout=120) == list(range(total))
    return slowest[0]
