"""Which queues hold anything at all, for thousands of queues in a few round trips.

``taskforge status`` and the dashboard's overview show every queue ever
used on a Redis. Reading one queue's counts costs about ten round trips
(``inspection.py``), and its last hour of stats 60 reads, so 5,000 one-off
queues cost tens of thousands of round trips: seconds of waiting (issue 47:
4.8 s for status, 8.1 s for the overview). Most such queues hold nothing.
``queue_probe.lua`` tells, per queue in one short call, whether a key that
holds or counts jobs exists, whether it has stats in the last hour, and how
many of its jobs expired unrun in it; the calls of ``PROBE_BATCH`` queues go
in one pipeline (per master, on a Cluster). Only the queues with jobs, or
with stats for the dashboard's chart, pay for the full read.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple

from . import calls
from .keys import QueueKeys

if TYPE_CHECKING:
    from .link import Link

PROBE_BATCH = 500  # queues per pipelined round trip: each call is a few dozen EXISTS, tens of µs
HOUR = 60


class Probe(NamedTuple):
    jobs: bool  # a key that holds or counts jobs exists: read the queue in full
    active: bool  # a stats key of the last hour exists (runs, failures, expiries)
    expired: int  # jobs that reached their expires time unrun in the last hour


class QueueProbe:
    """``queue_probe.lua`` over many queues, a batch per pipeline."""

    def __init__(self, link: Link) -> None:
        self.client = link.client
        self.scripts = link.scripts
        self.guard = link.guard

    def probe(self, queues: Sequence[str]) -> dict[str, Probe]:
        if not queues:
            return {}
        with self.guard():
            seconds, _ = self.client.time()
        minute = int(seconds) // 60
        found: dict[str, Probe] = {}
        for start in range(0, len(queues), PROBE_BATCH):
            batch = queues[start : start + PROBE_BATCH]
            with self.guard():
                replies = self.scripts.run_each(
                    [calls.queue_probe(QueueKeys(q), minute=minute, minutes=HOUR) for q in batch]
                )
            found.update((q, Probe(*reply)) for q, reply in zip(batch, replies, strict=True))
        return found
