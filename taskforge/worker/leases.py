"""Keep this worker's claims alive, and take back the claims of workers that died.

A claim lasts ``--visibility-timeout`` unless renewed. The supervisor, not
the child, renews it: a task holding the GIL for an hour cannot starve its
own lease. Renewal is also how an ``abort()`` reaches a running job (the
reply names the jobs to stop) and how this worker learns a claim of its own
was taken over. Reclaiming is the other side of the same contract: a claim
nobody renewed goes back to its queue, or to the dead letters if that was
its last attempt.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from ..errors import CorruptQueue

if TYPE_CHECKING:
    from ..broker.roles import ClaimsRole
    from ..metrics import WorkerMetrics
    from .pool import Running

log = logging.getLogger("taskforge.worker")

# At least every second: renewal is also how an abort() reaches a running job.
ABORT_CHECK_EVERY = 1.0

LostClaim = tuple[str, str, str]  # queue, job id, token


def renew_every(visibility_timeout: float) -> float:
    """A third of the lease, so two renewals may fail before a live claim expires."""
    return max(0.1, min(ABORT_CHECK_EVERY, visibility_timeout / 3))


class Leases:
    """Renewal of this worker's claims and the reclaim of expired ones, with what each finds."""

    def __init__(
        self,
        claims: ClaimsRole,
        lease_ms: int,
        report_damage: Callable[[CorruptQueue], None],
        metrics: WorkerMetrics | None = None,
    ) -> None:
        self.claims = claims
        self.lease_ms = lease_ms
        self.report_damage = report_damage
        self.metrics = metrics
        self.lost_once: set[LostClaim] = set()  # claims the last renewal found lost
        # Claims whose records a restarted Redis forgot (``server_watch.py``): not renewed, not reported.
        self.forgotten: set[LostClaim] = set()
        self.on_lost: Callable[[set[LostClaim]], None] | None = None  # asked before lost claims are reported

    def renew(self, held: Iterable[Running], stop: Callable[[set[str]], None]) -> None:
        """Extend the lease of every claim in ``held``; ``stop`` the jobs someone asked to abort.

        Each queue's aborts are acted on as soon as its reply is in, even if
        a later queue's renewal fails.
        """
        by_queue: dict[str, list[tuple[str, str]]] = {}
        still: set[LostClaim] = set()
        for running in held:
            claim = (running.job.queue, running.job.job_id, running.job.token)
            if claim in self.forgotten:
                still.add(claim)
                continue
            by_queue.setdefault(running.job.queue, []).append((running.job.job_id, running.job.token))
        self.forgotten = still  # a forgotten claim's run ended: nothing more to skip
        lost_now: set[LostClaim] = set()
        for queue, claims in by_queue.items():
            try:
                lost, aborted = self.claims.extend(queue, self.lease_ms, claims)
            except CorruptQueue as exc:
                self.report_damage(exc)
                continue
            tokens = dict(claims)
            lost_now.update((queue, job_id, tokens[job_id]) for job_id in lost)
            if aborted:
                stop(set(aborted))
        if lost_now and self.on_lost is not None:
            self.on_lost(lost_now)
        self.report_lost(lost_now - self.forgotten)

    def forget(self, claims: set[LostClaim]) -> None:
        """Claims whose job records are gone (the server lost its data): stop renewing and reporting them."""
        self.forgotten |= claims

    def report_lost(self, lost_now: set[LostClaim]) -> None:
        """Warn about claims (queue, id, token) found lost by two renewals in a row.

        A child records its job and only then tells us it moved on, so a
        renewal landing in between finds the job finished, or already retried
        and claimed again, and calls the claim lost. A claim really taken over
        is still held by its child a renewal later.
        """
        for queue, job_id, _ in sorted(lost_now & self.lost_once):
            log.warning(
                "%s in %s: this worker no longer holds its claim (its lease expired and the job was reclaimed)",
                job_id,
                queue,
            )
        self.lost_once = lost_now

    def reclaim(self, queues: Iterable[str]) -> None:
        """Send expired claims back to their queue (or bury them), and say so."""
        for queue in queues:
            try:
                back, buried, dropped = self.claims.reclaim(queue)
            except CorruptQueue as exc:
                # The other queues are still served; the damage is said once, not every second.
                self.report_damage(exc)
                continue
            if self.metrics is not None:
                self.metrics.reclaimed(queue, len(back) + len(buried))
            for job_id in back:
                log.warning("reclaimed %s in %s: its worker stopped renewing the lease", job_id, queue)
            for job_id in buried:
                log.warning("%s in %s is dead: its worker was lost on the last attempt", job_id, queue)
            if dropped:
                log.warning("dropped %d expired claims without a job record in %s", dropped, queue)
