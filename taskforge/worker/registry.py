"""What a live worker says about itself, for ``taskforge status`` and the dashboard.

The worker side of the listing: who this worker is (host, pid, queues,
capacity) and what it runs right now. Storing it is the broker's job
(``broker/workers.py``), so the key layout stays in one package.
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ..broker import workers
from ..broker.clock import RedisClock
from ..broker.workers import Client
from . import identity

if TYPE_CHECKING:
    from .pool import Running


def owner_tag() -> str:
    """A prefix unique to one worker, put on every claim token its children use.

    It is how the jobs of a worker proved dead are found (see ``rescue.py``):
    each running job's record holds the token that claimed it.
    """
    return os.urandom(6).hex() + "."


class WorkerRegistry:
    def __init__(
        self,
        client: Client,
        queues: list[str],
        concurrency: int,
        ttl: float,
        tasks: Iterable[str] = (),
        keep: float = 0.0,
        owner: str = "",
        clock: RedisClock | None = None,
    ) -> None:
        self.client = client
        # Redis's clock, not this host's: the listing is pruned by these times,
        # and a worker minutes off must neither prune live workers nor be pruned.
        self.clock = clock or RedisClock(client)
        self.id = f"{socket.gethostname()}:{os.getpid()}:{os.urandom(2).hex()}"
        self.ttl_ms = int(ttl * 1000)
        # Once its beats stop, the entry outlives the alive listing by ``keep`` (the lease): a worker
        # restarted on this host later than ``ttl`` still proves it gone and takes its jobs back.
        self.keep_ms = int(keep * 1000)
        self.owner = owner or owner_tag()
        # The tasks this worker serves: another worker leaves their jobs to it (``foreign.py``).
        # Host, boot, pid namespace and the processes with their start times: what proves it gone.
        self.static: dict[str, workers.Field] = {
            "id": self.id,
            "pid": os.getpid(),
            "queues": json.dumps(queues),
            "concurrency": concurrency,
            "started_at": 0,  # Redis's time at the first beat
            "tasks": json.dumps(sorted(tasks)),
            "owner": self.owner,
            **identity.here(),
        }
        self.supervisor = identity.process(os.getpid())

    def beat(self, running: Iterable[Running], jobs_done: int, children: Iterable[int] = ()) -> None:
        """Renew this worker's entry, listing the jobs its children run now and the children's pids."""
        now = self.clock.sync()
        self.static["started_at"] = self.static["started_at"] or now
        current = [describe(job, now) for job in running]
        processes = [self.supervisor, *(identity.process(pid) for pid in children)]
        fields = {
            **self.static,
            "jobs_done": jobs_done,
            "current": json.dumps(current),
            "heartbeat": now,
            "processes": json.dumps(processes),
            "clock_offset_ms": self.clock.offset_ms,
        }
        workers.beat(self.client, self.id, fields, self.ttl_ms, now, self.keep_ms)

    def remove(self) -> None:
        workers.remove(self.client, self.id)


def describe(running: Running, now_ms: int) -> dict[str, Any]:
    """One running job as the listing shows it; its start on Redis's clock (``now_ms``), from the monotonic one."""
    job = running.job
    return {
        "id": job.job_id,
        "task": job.task,
        "queue": job.queue,
        "started_at": int(now_ms - (time.monotonic() - running.started) * 1000),
    }
