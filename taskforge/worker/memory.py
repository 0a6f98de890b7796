"""``--max-memory-per-child MB``: a child whose resident memory passed MB is replaced once its jobs end.

As Celery's flag of the same name: a task that leaks (a cache that only
grows, a C library's buffers) costs a child, not the host. The child reads
its own resident size about once a second, on a thread of its own, never on
a job's path; past the limit it stops claiming, its lanes finish the jobs
they run, and it exits to be replaced (the supervisor's recycling, as for
``--max-jobs-per-child``).
"""

from __future__ import annotations

import logging
import os
import resource
import sys
import threading
from collections.abc import Callable

log = logging.getLogger("taskforge.worker")

CHECK_EVERY = 1.0
MB = 1024 * 1024


def resident_mb() -> float:
    """This process's resident memory now, in MB (its peak where ``/proc`` is missing)."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            pages = int(statm.read().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / MB
    except (OSError, ValueError, IndexError):
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KB on Linux, bytes on macOS
        return peak / MB if sys.platform == "darwin" else peak / 1024


def watch_memory(limit_mb: int, index: int, recycle: Callable[[], None], stop: threading.Event) -> None:
    """Check ``resident_mb`` every second until ``stop``; past ``limit_mb``, say so once and ``recycle``."""

    def check() -> None:
        while not stop.wait(CHECK_EVERY):
            used = resident_mb()
            if used > limit_mb:
                log.warning(
                    "child %d: resident memory %.0f MB passed --max-memory-per-child %d MB; "
                    "replacing it once its running jobs end",
                    index,
                    used,
                    limit_mb,
                )
                recycle()
                return

    threading.Thread(target=check, name="taskforge-memory", daemon=True).start()
