"""Take back at once the jobs of a worker on this machine whose processes provably no longer exist.

After ``kill -9`` of a whole worker, its claims would wait out their lease
(60 s by default) before any reclaim takes them back. A worker that starts
on the same machine, or one already running there, can tell sooner: the
dead worker's listing (``registry.py``) names its host, boot, pid namespace
and processes with their start times, and ``identity.provably_gone``
checks them against ``/proc``. Only then are its claims expired
(``expire_owner.lua``: the running jobs whose claim token carries its
prefix) and reclaimed by the supervisor's next reclaim, on those queues too,
through the one reclaim path every lost claim takes:
back in line with a worker loss counted (not an attempt), or dead once its
``max_worker_losses`` are spent (a
job of one of its batches it never started: back with its attempt
refunded), the token cleared so a late write from the dead worker is fenced.

A worker on another machine, in another container, or on a listing without
these facts (an older version) is never judged: its claims expire as before.
The dead worker is listed as alive ``10 x HEARTBEAT_EVERY`` (20 s) after its
last heartbeat, and its entry is kept a lease longer (``broker/workers.py``):
a worker restarted later than 20 s still finds it, however long the restart
took; once the entry is gone, so are its leases, and the reclaim brings the
jobs back.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from ..broker import workers
from . import identity

if TYPE_CHECKING:
    from ..broker.roles import ClaimsRole
    from ..broker.workers import Client

log = logging.getLogger("taskforge.worker")

RESCUE_EVERY = 4.0  # seconds between two looks at the listing (the idle reclaim runs every 5 s)


class Rescue:
    """Finds this machine's dead workers in the listing and reclaims their jobs."""

    def __init__(self, claims: ClaimsRole, client: Client, own_id: str) -> None:
        self.claims = claims
        self.client = client
        self.own_id = own_id
        self.facts = identity.here()
        self.next_at = 0.0

    def due(self, now: float) -> bool:
        if now < self.next_at:
            return False
        self.next_at = now + RESCUE_EVERY
        return True

    def run(self) -> set[str]:
        """Expire the claims of every provably dead worker of this machine: the queues to reclaim now."""
        if not self.facts["boot"] or not self.facts["pidns"]:
            return set()  # nothing can be proved here (no /proc): leases expire as before
        queues: set[str] = set()
        for entry in workers.live_workers(self.client, host=self.facts["host"], lost=True):
            if entry["id"] == self.own_id or not entry["owner"] or not identity.provably_gone(entry, self.facts):
                continue
            queues |= self.expire(entry)
        return queues

    def expire(self, entry: dict[str, Any]) -> set[str]:
        """Expire the dead worker's claims and drop its listing; the queues where it held some."""
        owner = str(entry["owner"])
        held = {queue: self.claims.expire_owner(queue, owner) for queue in entry["queues"] if isinstance(queue, str)}
        workers.remove(self.client, str(entry["id"]))
        log.warning(
            "worker %s is gone (pid %s and its children no longer exist on this host): "
            "its %d claimed jobs are taken back now, not when their leases expire",
            entry["id"],
            entry["pid"],
            sum(held.values()),
        )
        return {queue for queue, n in held.items() if n}
