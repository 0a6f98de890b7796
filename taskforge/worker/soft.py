"""Soft timeouts in lanes: raise ``SoftTimeout`` inside the thread running a job, and only there.

The supervisor's clock decides (it sends ``CancelJob(job, "soft")``); the
child's control listener calls ``interrupt``. The exception must reach the
task, never the code around it that records the outcome, so a lane marks
the span in which its task runs (``running``) and an interrupt is made only
inside it. Two ways to raise it, as CPython allows:

* the main thread (a child's only lane) gets a signal, whose handler raises:
  that interrupts a blocking call such as ``time.sleep``;
* another thread (a ``-t`` lane) gets ``PyThreadState_SetAsyncExc``, which
  raises at its next bytecode: a blocking call in C ends first. One not yet
  raised when the task returns is withdrawn before the lane goes on.
"""

from __future__ import annotations

import ctypes
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from ..errors import SoftTimeout

SIGNAL = signal.SIGUSR1


@dataclass
class Span:
    job_id: str
    soft_timeout: float
    thread: int
    sent: bool = False


_lock = threading.RLock()  # reentrant: the signal handler runs in the main thread, which may hold it
_spans: dict[int, Span] = {}  # thread ident -> the job whose task runs in it now


def install() -> None:
    """In a child process's main thread: the handler that raises in the main thread's task."""
    signal.signal(SIGNAL, _on_signal)


def _on_signal(signum: int, frame: object) -> None:
    with _lock:
        span = _spans.get(threading.get_ident())
        raise_it = span is not None and span.sent
    if raise_it and span is not None:
        raise SoftTimeout(f"job {span.job_id} ran past its soft timeout of {span.soft_timeout:g} s")


@contextmanager
def running(job_id: str, soft_timeout: float | None) -> Iterator[None]:
    """The span in which a task runs: an interrupt for ``job_id`` is raised only in here."""
    if soft_timeout is None:
        yield
        return
    ident = threading.get_ident()
    with _lock:
        _spans[ident] = Span(job_id, soft_timeout, ident)
    try:
        yield
    finally:
        with _lock:
            span = _spans.pop(ident, None)
            if span is not None and span.sent and ident != threading.main_thread().ident:
                ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(ident), None)  # withdraw a late one


def interrupt(job_id: str) -> bool:
    """Raise ``SoftTimeout`` in the thread running ``job_id``'s task; False if none runs it now."""
    with _lock:
        span = next((s for s in _spans.values() if s.job_id == job_id), None)
        if span is None or span.sent:
            return False
        span.sent = True
        if span.thread == threading.main_thread().ident:
            signal.pthread_kill(span.thread, SIGNAL)
        else:
            exc = ctypes.py_object(SoftTimeout)
            ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(span.thread), exc)
    return True
