"""How a worker was asked to run, as the CLI parsed it: one frozen value every part reads.

Its own module because the pool, the leases and the supervisor all read it,
and none of them should import another just for its settings.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class WorkerOptions:
    concurrency: int
    queues: tuple[str, ...]
    visibility_timeout: float = 60.0
    grace: float = 30.0
    burst: bool = False
    max_jobs_per_child: int = 0
    max_memory_per_child: int = 0  # MB of resident memory past which a child is replaced; 0: no limit
    log_level: str = "info"
    periodic: bool = True
    threads: int = 1
    async_slots: int = 100  # --async: jobs of async tasks each child runs at once on its event loop
    prefetch: int = 0  # --prefetch: jobs a lane claims at once; 0 is auto (``batches.py``)

    def is_async_slot(self, lane: int) -> bool:
        """A child's lanes are numbered from 0; its event loop's slots come after them."""
        return lane >= max(1, self.threads)

    @property
    def lease_ms(self) -> int:
        return int(self.visibility_timeout * 1000)
