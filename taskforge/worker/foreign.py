"""Jobs of a task this worker does not know, while another live worker of the queue serves it.

Two apps on one Redis database share the queue ``default``; without this, a
worker of app A dead-letters app B's jobs as ``UnknownTask`` the moment it
claims them. Each worker lists the tasks it serves in its heartbeat
(``registry.py``); a child that claims a job of a task it does not know
looks there, and when a live worker of the job's queue serves the task, it
gives the job back (``pass.lua``): unrun, its attempt refunded, due again
after a short delay that doubles with each pass of that job (0.5, 1, 2, 4,
then 5 s). The delay is what keeps this from spinning: the job leaves the
head of the queue, so this worker goes on with the jobs it can run instead
of claiming the same one again, and a job passed many times costs a claim
every few seconds, not a busy loop. The job keeps its priority; it takes a
new place among its priority's jobs when it comes back. For a while after a
pass, this worker waits ``HEAD_START`` longer for due jobs than it must, so
an idle worker that serves the job claims it first when it is due again.

When no live worker serves the task, the job is dead-lettered as before:
``UnknownTask`` naming it. The listing is read at most every ``REFRESH``
seconds per child, and only on this path: a worker that knows its tasks
never reads it.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING, Any

from ..broker import workers
from ..printable import printable
from .housekeeping import IDLE_HEARTBEAT_EVERY

if TYPE_CHECKING:
    from ..broker.queue import Claim
    from ..broker.roles import ClaimsRole
    from ..broker.workers import Client

log = logging.getLogger("taskforge.worker")

REFRESH = 2.0  # seconds a child trusts its copy of the live-worker listing
FIRST_PASS_MS = 500
LONGEST_PASS_MS = 5_000
# For a while after a pass, this child waits this much longer for due jobs than it has to: the
# worker that serves the passed job, idle, claims it first when it comes back in line.
HEAD_START = 0.5
# A listed worker whose heartbeat is older than this is taken for dead (its hash lives a little longer).
FRESH_MS = int(3 * IDLE_HEARTBEAT_EVERY * 1000)


class Elsewhere:
    """One child's view of which live workers serve which tasks on which queues."""

    def __init__(self, claims: ClaimsRole, client: Client) -> None:
        self.claims = claims
        self.client = client
        self.lock = threading.Lock()  # the lanes of a child share it
        self.listing: list[dict[str, Any]] = []
        self.read_at = -REFRESH
        self.said: set[tuple[str, str]] = set()  # (queue, task) pairs already logged
        self.yielding_until = 0.0  # monotonic: until then, due jobs are left a head start to others

    def live(self) -> list[dict[str, Any]]:
        with self.lock:
            now = time.monotonic()
            if now - self.read_at >= REFRESH:
                self.listing = workers.live_workers(self.client)
                self.read_at = now
            return self.listing

    def servers(self, queue: str, task: str) -> list[str]:
        """The ids of live workers that serve ``task`` on ``queue``."""
        fresh = time.time() * 1000 - FRESH_MS
        return [
            w["id"]
            for w in self.live()
            if w["heartbeat"] >= fresh and queue in w["queues"] and task in (w["tasks"] or ())
        ]

    def pass_on(self, claim: Claim) -> tuple[str, str, float] | None:
        """Give ``claim`` back if another live worker serves its task: (state, to whom, seconds until due again).

        The state is ``passed``, or ``fenced`` when the claim was no longer ours.

        None when no live worker serves it (or Redis could not be read): the
        caller dead-letters it as an unknown task, as it always did.
        """
        try:
            served_by = self.servers(claim.queue, claim.task)
        except Exception as exc:  # Redis away: the unknown-task path records (and waits out) the outage
            log.debug("cannot read the worker listing: %s", exc)
            return None
        if not served_by:
            return None
        delay = self.claims.pass_job(claim.queue, claim.id, claim.token, FIRST_PASS_MS, LONGEST_PASS_MS)
        to = ", ".join(served_by)
        if delay < 0:
            return "fenced", to, 0.0
        self.yielding_until = time.monotonic() + delay / 1000 + 4 * HEAD_START
        self.say_once(claim, to)
        return "passed", to, delay / 1000

    def timeout(self, wait: float, longest: float) -> float:
        """How long an idle lane waits for a job due in ``wait`` s: a head start longer after a pass.

        Jobs sent meanwhile still wake it at once; only a due job (a retry, a
        ``apply_in``) of this worker's own may start up to ``HEAD_START`` later.
        """
        if time.monotonic() < self.yielding_until:
            return min(wait + HEAD_START, longest)
        return min(wait, longest)

    def say_once(self, claim: Claim, served_by: str) -> None:
        if (claim.queue, claim.task) in self.said:
            return
        self.said.add((claim.queue, claim.task))
        log.warning(
            "this worker's app does not define task %s; its jobs in queue %s are left for %s, which serves it "
            "(give each app queues of its own to avoid the detour)",
            printable(claim.task),
            claim.queue,
            served_by,
        )


def differing_tasks(own_id: str, queues: list[str], tasks: set[str], listing: list[dict[str, Any]]) -> str | None:
    """The warning a starting worker logs when live workers on its queues serve other tasks, or None."""
    shared: set[str] = set()
    only_here: set[str] = set()
    only_there: set[str] = set()
    for w in listing:
        if w["id"] == own_id or w["tasks"] is None:
            continue
        common = set(queues) & set(w["queues"])
        theirs = set(w["tasks"])
        if common and theirs != tasks:
            shared |= common
            only_here |= tasks - theirs
            only_there |= theirs - tasks
    if not shared:
        return None
    return (
        f"live workers on queue {', '.join(sorted(shared))} serve different tasks "
        f"(here and not on another: {', '.join(sorted(only_here)) or 'none'}; "
        f"on another and not here: {', '.join(sorted(only_there)) or 'none'}); "
        "a job of a task one worker does not know is left for a worker that serves it"
    )
