"""How a child process comes to be: forked from the fork server when there is one, else spawned.

A forked child has everything imported already (``forkserver.py``); a
spawned one starts a new interpreter and imports the app afresh, which is
what a warm restart wants and what a system without the fork server gets.
Either way the pool gets the same four things: the process, the pipe the
child reports on, the pipe it is told on, and the supervisor's view of the
child's board.
"""

from __future__ import annotations

import logging
import multiprocessing
from collections.abc import Collection
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Protocol

from .board import Board, LaneBatches
from .child import ChildConfig, child_main
from .forkserver import reap_strays

if TYPE_CHECKING:
    from .forkserver import ForkServer

log = logging.getLogger("taskforge.worker")


class ChildProcess(Protocol):
    """A spawned child (multiprocessing's process) or a forked one (``forkserver.ForkedChild``)."""

    @property
    def pid(self) -> int | None: ...
    @property
    def sentinel(self) -> int: ...
    @property
    def exitcode(self) -> int | None: ...
    def join(self, timeout: float | None = None) -> None: ...


Started = tuple[ChildProcess, Connection, Connection, LaneBatches]


class Starter:
    """Starts the children of one pool; holds the fork server while there is one."""

    def __init__(self, threads: int) -> None:
        self.threads = threads
        self.ctx = multiprocessing.get_context("spawn")
        self.forks: ForkServer | None = None  # set by the worker command when it made one
        self.subreaper = False  # orphans of this process's descendants come to it: see ``reap_strays``

    def start(self, config: ChildConfig) -> Started:
        return self.forked(config) or self.spawned(config)

    def forked(self, config: ChildConfig) -> Started | None:
        """A child from the fork server; None without one, or when it failed (then children are spawned)."""
        if self.forks is None:
            return None
        try:
            process, reader, control, shared = self.forks.start_child(config, self.threads)
        except OSError as exc:
            log.warning("the fork server failed (%s); spawning children from now on", exc)
            self.close_forks()
            return None
        return process, reader, control, LaneBatches(Board(shared))

    def spawned(self, config: ChildConfig) -> Started:
        """A child in a new interpreter (``spawn``): it imports the app afresh."""
        reader, writer = self.ctx.Pipe(duplex=False)
        control_reader, control_writer = self.ctx.Pipe(duplex=False)
        board = Board.new(self.ctx, self.threads)
        args = (config, writer, control_reader, board.shared)
        process = self.ctx.Process(target=child_main, args=args, name=f"taskforge-child-{config.index}")
        process.start()
        writer.close()
        control_reader.close()
        return process, reader, control_writer, LaneBatches(board)

    def adopt(self, forks: ForkServer | None) -> None:
        """Fork the children from ``forks`` while it lasts (None: spawn them)."""
        self.forks = forks
        self.subreaper = self.subreaper or forks is not None

    def reap_strays(self, children: Collection[int]) -> None:
        """A subreaper reaps what it adopted: processes the jobs left behind, once they end."""
        if self.subreaper:
            known = {*children, *(p.pid for p in multiprocessing.active_children() if p.pid is not None)}
            reaped = reap_strays(known | ({self.forks.pid} if self.forks is not None else set()))
            if reaped:
                log.info("reaped %d process(es) a job left behind: pids %s", len(reaped), reaped)

    def close_forks(self) -> None:
        """No more children from the fork server (a warm restart, the worker's end, its failure)."""
        forks, self.forks = self.forks, None
        if forks is not None:
            forks.close()
