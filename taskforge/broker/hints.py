"""What the client tells a claim so the plain one pays only for what it uses.

One per ``Link``, used by ``Claims`` (and by ``Jobs``, which learns of limits
as it enqueues). The claim script used to find out for itself, on
every call, whether the previous call with the same token lost its reply
(a claim list per token), whether the queue has limited tasks (``HKEYS``
of the limits hash) and whether scheduled jobs are due (``ZRANGEBYSCORE``):
four to six commands a job for events that are rare. The client knows, or
can learn cheaply, and passes flags (``calls.ClaimFlags``):

- ``retry``: this token was sent before and that call raised (or redis-py
  re-sent it after a connection error); only then does the script look for
  the token's jobs among the latest claims.
- ``limited``: this queue has limited tasks or keyed jobs (lanes). Learned
  when this client enqueues a limited or keyed job or registers limits, and
  otherwise read (one ``EXISTS``) at most once a second; a claim that finds nothing ready looks
  at everything anyway, so a stale flag never leaves a job waiting while
  the worker idles.
- ``promote``: move due scheduled jobs, at most every ``PROMOTE_EVERY_S``
  per queue (and, again, whenever nothing is ready), so a busy worker starts
  a due job at most that late.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

import redis

if TYPE_CHECKING:
    from .scripts import Scripts

from . import calls
from .calls import ClaimFlags
from .connection import resends
from .keys import QueueKeys
from .replies import ClaimReply

PROMOTE_LIMIT = 200  # at most this many due jobs promoted per call, so a million never stall Redis
PROMOTE_EVERY_S = 0.05
LIMITS_REFRESH_S = 1.0
# Tokens whose call raised, kept until a call with them answers; bounded, as
# a caller may drop a token (a queue quarantined) and never send it again.
UNANSWERED_KEPT = 1024


def dequeue_call(
    q: QueueKeys, token: str, lease_ms: int, count: int, flags: calls.ClaimFlags
) -> calls.ScriptCall[ClaimReply]:
    return calls.dequeue(
        q,
        token=token,
        lease_ms=lease_ms,
        promote_limit=PROMOTE_LIMIT,
        count=count,
        **flags.kwargs(),
    )


class ClaimHints:
    """The flags of each claim: what this client remembers of its tokens, queues and limits."""

    def __init__(self, client: redis.Redis | redis.RedisCluster, scripts: Scripts) -> None:
        self.client = client
        self.scripts = scripts
        self._hints_lock = threading.Lock()
        self._unanswered: dict[str, None] = {}
        self._promoted: dict[str, float] = {}
        self._limited: dict[str, tuple[bool, float]] = {}
        self.promote_every_s = PROMOTE_EVERY_S  # 0: every claim promotes (what a model of the queue expects)

    def claim_flags(self, queue: str, token: str) -> ClaimFlags:
        """The flags of a claim with ``token`` about to be sent; the token counts as unanswered until it answers."""
        now = time.monotonic()
        with self._hints_lock:
            retry = token in self._unanswered
            self._unanswered[token] = None
            while len(self._unanswered) > UNANSWERED_KEPT:
                del self._unanswered[next(iter(self._unanswered))]
            promote = now - self._promoted.get(queue, -self.promote_every_s) >= self.promote_every_s
            if promote:
                self._promoted[queue] = now
        return ClaimFlags(promote=promote, limited=self._has_limits(queue, now), retry=retry)

    def recovered(
        self, q: QueueKeys, token: str, lease_ms: int, count: int, flags: calls.ClaimFlags, sent: int, reply: ClaimReply
    ) -> ClaimReply:
        """``reply``, or, when redis-py re-sent the claim after a connection error, every job of ``token``.

        The re-send carried no retry flag, so the jobs of a first send whose
        reply was lost would wait for their lease to expire; asking again
        with the flag hands back all of the token's jobs (the re-send's among them).
        """
        if resends() == sent or flags.retry:
            return reply
        again = flags._replace(retry=True)
        recovered: ClaimReply = self.scripts.run(dequeue_call(q, token, lease_ms, count, again))
        return ClaimReply(reply.dropped + recovered.dropped, recovered.wait_ms, recovered.rows)

    def answered(self, token: str) -> None:
        """A call with ``token`` got its reply: a later call with it is no re-send."""
        with self._hints_lock:
            self._unanswered.pop(token, None)

    def knows_limits(self, queue: str) -> None:
        """This client wrote limits for ``queue``: its claims look at limited tasks from now on."""
        self._limited[queue] = (True, time.monotonic())

    def _has_limits(self, queue: str, now: float) -> bool:
        known = self._limited.get(queue)
        if known is not None and (known[0] or now - known[1] < LIMITS_REFRESH_S):
            return known[0]
        # Limits once written stay until a worker removes them: re-read only a "no".
        q = QueueKeys(queue)
        has = bool(self.client.exists(q.limits, q.turns, q.held))
        self._limited[queue] = (has, now)
        return has
