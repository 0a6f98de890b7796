"""A SIGTERM handled while a child is being started still reaches that child.

The supervisor's handler runs between two bytecodes of its main thread; if
that is inside ``Pool.spawn``, after the process started and before its slot
was recorded, ``Pool.stop`` signals every child but the new one, and a
signal that reached the child between its fork and its exec is lost too. The
child then idles on and the worker waits for it forever (seen after an
abort, whose killed child is started again, met a SIGTERM).
"""

from __future__ import annotations

import signal
from typing import Any

from taskforge.worker import pool as pool_module
from taskforge.worker.options import WorkerOptions
from taskforge.worker.pool import Pool


class FakeProcess:
    pid = 4242
    sentinel = 0
    exitcode = None  # running

    def __init__(self, started: Any) -> None:
        self.started = started

    def start(self) -> None:
        self.started()


class FakePipe:
    def close(self) -> None:
        pass


def test_a_stop_during_a_spawn_signals_the_new_child(monkeypatch) -> None:
    pool = Pool("app:app", WorkerOptions(concurrency=1, queues=("default",)))
    sent: list[tuple[int, int]] = []

    class Context:
        def Pipe(self, duplex: bool) -> tuple[FakePipe, FakePipe]:  # noqa: N802 - multiprocessing's name
            return FakePipe(), FakePipe()

        def Process(self, **_: Any) -> FakeProcess:  # noqa: N802
            return FakeProcess(pool.stop)  # the SIGTERM handler runs as the process starts

        def RawArray(self, kind: str, size: int) -> list[float]:  # noqa: N802
            return [0.0] * size

    monkeypatch.setattr(pool.starter, "ctx", Context())
    monkeypatch.setattr(pool_module, "signal_child", lambda slot, signum: sent.append((slot.index, signum)))
    pool.spawn(0)
    assert sent == [(0, signal.SIGTERM)]


def test_a_spawn_outside_a_stop_signals_nothing(monkeypatch) -> None:
    pool = Pool("app:app", WorkerOptions(concurrency=1, queues=("default",)))
    sent: list[tuple[int, int]] = []

    class Context:
        def Pipe(self, duplex: bool) -> tuple[FakePipe, FakePipe]:  # noqa: N802
            return FakePipe(), FakePipe()

        def Process(self, **_: Any) -> FakeProcess:  # noqa: N802
            return FakeProcess(lambda: None)

        def RawArray(self, kind: str, size: int) -> list[float]:  # noqa: N802
            return [0.0] * size

    monkeypatch.setattr(pool.starter, "ctx", Context())
    monkeypatch.setattr(pool_module, "signal_child", lambda slot, signum: sent.append((slot.index, signum)))
    pool.spawn(0)
    assert sent == [] and 0 in pool.children
