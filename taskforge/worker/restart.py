"""SIGHUP: a warm restart. Every child finishes the jobs it runs and is replaced; the supervisor stays.

Process managers send SIGHUP to say "reload". Stopping the worker for it, as
the default action does, would end its running ``max_attempts=1`` jobs dead;
here each child is asked to stop as in a graceful stop (SIGTERM: finish what
it runs, claim nothing more), and a new process takes its slot as soon as it
exits, importing the app afresh, so new code is picked up. The supervisor
keeps renewing every lease meanwhile: its loop goes on as before. Children
ignore SIGHUP themselves (``hangup.py``).
"""

from __future__ import annotations

import logging
import signal
import time
from typing import TYPE_CHECKING

from .pool import signal_child

if TYPE_CHECKING:
    from .pool import Pool

log = logging.getLogger("taskforge.worker")


class WarmRestart:
    """One warm restart at a time: asked for by the signal handler, carried out by the supervisor's loop."""

    def __init__(self, pool: Pool) -> None:
        self.pool = pool
        self.requested = False
        self.pending: set[int] = set()  # slots whose child was asked to go and has no successor yet
        self.began = 0.0

    @property
    def under_way(self) -> bool:
        return self.requested or bool(self.pending)

    def on_signal(self, signum: int, _frame: object) -> None:
        """SIGHUP: note it (the loop acts within a tick); a second one during a restart does not double it."""
        name = signal.Signals(signum).name
        if self.pool.stopping:
            log.info("received %s while stopping: ignored", name)
        elif self.under_way:
            log.info("received %s during a warm restart: ignored, the one under way goes on", name)
        else:
            self.requested = True
            log.info(
                "received %s: warm restart; each child finishes its running jobs and is replaced "
                "by a new one (the app imported afresh); leases stay renewed",
                name,
            )

    def step(self) -> bool:
        """Begin a restart asked for, or say when the one under way is done; True when children were told."""
        if self.requested:
            if self.pool.stopping:
                self.requested = False
                return False
            self.began = time.monotonic()
            self.pending = self.ask_children()
            self.requested = False  # after: a SIGHUP meanwhile still finds this restart under way
            return True
        if self.pending and not self.pool.stopping:
            children = self.pool.children
            self.pending -= {i for i in self.pending if i in children and not children[i].restarting}
            if not self.pending:
                log.info(
                    "warm restart done in %.1f s: children now pids %s",
                    time.monotonic() - self.began,
                    ", ".join(map(str, sorted(self.pool.pids()))),
                )
        return False

    def ask_children(self) -> set[int]:
        """Ask every child to finish its jobs and go (SIGTERM); the pool replaces each as it exits.

        The fork server holds the app as it was imported at start: it is closed, and the new
        children are spawned, each importing the app afresh (new code is what a restart is for).
        """
        self.pool.starter.close_forks()
        for slot in self.pool.children.values():
            slot.restarting = True
            signal_child(slot, signal.SIGTERM)
        return set(self.pool.children)
