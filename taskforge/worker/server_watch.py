"""The supervisor's watch on its Redis: settings that can lose jobs, and a restart that lost them.

At start and every ``CHECK_EVERY`` seconds the supervisor asks the server
how it keeps data (``broker/server_health.py``) and logs each risk as a
WARNING: at start, and again whenever the set of risks changes (not every
few minutes while it stays the same).

It also remembers the server's ``run_id``. A Redis restarted without its
data loses the records of the jobs this worker runs; every renewal then
finds those claims lost, and the worker used to say, every second, that
their leases had expired and another worker had taken them (untrue), then
log their successes, stored nowhere. So when a renewal finds lost claims,
or a check finds a new run id, the watch asks the server again: a changed
run id with the held jobs' records gone is one ERROR with the count, and
those claims are forgotten (``Leases.forget``): neither renewed nor
reported again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

import redis

from ..broker import server_health

if TYPE_CHECKING:
    from ..app import TaskForge
    from .leases import Leases, LostClaim
    from .pool import Running

log = logging.getLogger("taskforge.worker")

CHECK_EVERY = 180.0  # seconds between two looks at the server's settings


class ServerWatch:
    """Checks the server's settings now and then, and tells a restart that lost data from one that did not."""

    def __init__(
        self,
        app: TaskForge,
        leases: Leases,
        held: Callable[[], Iterable[Running]],
        on_restart: Callable[[], None] = lambda: None,
    ) -> None:
        self.app = app
        self.on_restart = on_restart  # what a server that may have lost its data needs again (task limits)
        self.leases = leases
        self.held = held
        self.replicated = app.durability == "replicated"
        self.run_ids: dict[str, str] = {}  # server -> the run id last seen
        self.said: list[str] = []  # the warnings logged last
        self.next_at = 0.0
        self.denied = False  # INFO refused (ACL): said once
        self.asked: set[LostClaim] = set()  # the lost claims a check was made for
        leases.on_lost = self.claims_lost

    def due(self, now: float) -> bool:
        if now < self.next_at:
            return False
        self.next_at = now + CHECK_EVERY
        return True

    def check(self) -> None:
        """Ask the server(s); warn about new risks; look for a restart."""
        if self.denied:  # an ACL without +info: asking again would fill its ACL LOG
            return
        try:
            healths = server_health.check_servers(self.app.broker.client, self.app.url)
        except redis.ResponseError as exc:  # INFO denied by an ACL: run without the check, say so once
            if not self.denied:
                log.info(
                    "cannot read the Redis server's settings (%s): eviction and persistence are not checked",
                    server_health.refusal(exc),
                )
            self.denied = True
            return
        found = server_health.warnings(healths, self.replicated)
        for text in found:
            if text not in self.said:
                log.warning("%s", text)
        self.said = found
        restarted = [h.server for h in healths if self.run_ids.get(h.server, h.run_id) != h.run_id]
        self.run_ids.update((h.server, h.run_id) for h in healths)
        if restarted:
            self.count_gone(restarted)
            self.on_restart()

    def claims_lost(self, lost: set[LostClaim]) -> None:
        """A renewal found claims lost: a takeover, or a server that forgot them. Ask which, once per
        claim (a claim taken over stays lost until its run ends: one renewal a second would ask again)."""
        new, self.asked = lost - self.asked, set(lost)
        if not new or not self.run_ids:
            return
        try:
            self.check()
        except redis.RedisError as exc:  # the renewal itself went through: the periodic check asks again
            log.debug("the server check after lost claims failed: %s", exc)

    def count_gone(self, servers: list[str]) -> None:
        """The server restarted: are the records of the jobs this worker holds still there?"""
        held = [(r.job.queue, r.job.job_id, r.job.token) for r in self.held()]
        gone = {claim for claim, exists in zip(held, self.records_exist(held), strict=True) if not exists}
        where = ", ".join(s for s in servers if s) or "Redis"
        if not gone:
            log.info("%s restarted (its run id changed); the records of the jobs this worker holds are there", where)
            return
        self.leases.forget(gone)
        log.error(
            "%s restarted without its data: %d jobs this worker held are gone (their records no longer "
            "exist; pending and scheduled jobs are most likely gone too). Their runs are not recorded. "
            "Give Redis persistence (appendonly yes) or a replica with durability='replicated'",
            where,
            len(gone),
        )

    def records_exist(self, claims: list[LostClaim]) -> list[bool]:
        claims_role = self.app.broker.claims
        return [claims_role.job_fields(queue, job_id, ("state",))[0] is not None for queue, job_id, _ in claims]
