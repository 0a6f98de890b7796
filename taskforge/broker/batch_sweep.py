"""A worker finishes the sliced batches whose producer stopped between two commit steps.

A big ``delay_many`` (``batches.py``) is committed a slice per call. Once its
first commit step ran, the batch is promised whole: if its producer dies or
loses Redis before the last step, the batch stays listed in the queue's
``batches`` key, and the first worker to look (from its reclaim duty, every
``FINISH_EVERY`` seconds per queue) stores the rest, ``batches.FINISH_SLICES``
slices per round so its other duties keep their pace. A batch abandoned
before its commit is dropped the same way (its slices would expire, but
those its commit steps kept from expiring would not). Each step is atomic
and stores the next slice, so a producer that comes back and a worker can
both send steps: neither stores a slice twice.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from . import batches
from .keys import BatchKeys, QueueKeys
from .scripts import Scripts

# How often a worker looks for a stalled batch in each queue it reclaims.
FINISH_EVERY = 10.0


class BatchSweep:
    """The look and the finishing steps, one per ``Claims``."""

    def __init__(self, client: Any, scripts: Scripts, guard: Callable[..., AbstractContextManager[None]]) -> None:
        self.client = client
        self.scripts = scripts
        self.guard = guard
        self.due: dict[str, float] = {}

    def __call__(self, queue: str) -> int:
        """Steps taken for stalled batches of ``queue`` (0 when none, or not time to look yet): slices
        stored of a committed batch, or dropped of one abandoned before its commit."""
        now = time.monotonic()
        if now < self.due.get(queue, 0.0):
            return 0
        self.due[queue] = now + FINISH_EVERY
        q = QueueKeys(queue)
        with self.guard(queue):
            oldest = self.client.zrange(BatchKeys(q).batches, 0, 0)
            if not oldest:
                return 0
            call = batches.finish(q, oldest[0].decode(), batches.STALE_MS)
            stored = 0
            while stored < batches.FINISH_SLICES:
                if self.scripts.run(call).kind not in ("SLICE", "DROPPING"):
                    break
                stored += 1
        if stored:  # more may wait: look again at the next round
            self.due[queue] = 0.0
        return stored
