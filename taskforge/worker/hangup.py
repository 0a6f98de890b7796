"""SIGHUP in the worker's processes: the supervisor's to act on (``restart.py``), never a child's death.

A closing terminal sends SIGHUP to the whole process group. A child that died
of it would take its running jobs along; so children ignore it. A child is
started with SIGHUP blocked (the mask is inherited through fork and exec), and
unblocks it only once it ignores it: one sent while it still imports cannot
kill it either.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager

HUP = getattr(signal, "SIGHUP", None)  # not on Windows


@contextmanager
def hup_blocked() -> Iterator[None]:
    """SIGHUP held back while a child starts; one that comes meanwhile reaches the supervisor just after."""
    if HUP is None:
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {HUP})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def ignore_hup() -> None:
    """In a child, first thing: ignore SIGHUP, then let it through (a pending one is dropped)."""
    if HUP is not None:
        signal.signal(HUP, signal.SIG_IGN)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {HUP})
