"""How children are started, in a module light enough to import first thing.

``warm_up()`` starts the fork server the children are forked from: the
sooner it starts, the more of its imports (``preload.py``) overlap the
supervisor's own start (loading the app, meeting Redis). This module
imports only ``multiprocessing``, so a command line can call it before
importing anything heavy.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.forkserver
from multiprocessing.context import ForkServerContext, SpawnContext


def children_context() -> ForkServerContext | SpawnContext:
    """The fork server where the platform has one (Linux, macOS), else spawn."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["taskforge.worker.preload"])
    return ctx


def warm_up() -> None:
    """Start the fork server now: its imports run while the caller loads the app and meets Redis.

    Not waited for: the first child forked waits for it, by then mostly ready.
    """
    if children_context().get_start_method() == "forkserver":
        multiprocessing.forkserver.ensure_running()
