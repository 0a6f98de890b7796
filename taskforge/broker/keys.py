"""Every Redis key taskforge writes, in one place.

All keys of one queue share the hash tag ``{<queue>}``, so every Lua script
touches a single slot and runs unchanged on a Redis Cluster (what does need
care there, across queues, is in ``slots.py``)::

    taskforge:{q}:job:<id>     hash    one job: plain fields for Lua, msgpack payload/result
    taskforge:{q}:pending      zset    ready jobs; score = priority band + enqueue sequence
    taskforge:{q}:scheduled    zset    scheduled and retrying jobs; score = due time (ms)
    taskforge:{q}:running      zset    claimed jobs; score = lease deadline (ms)
    taskforge:{q}:dead         zset    dead-letter set; score = time of death (ms)
    taskforge:{q}:seq          string  enqueue counter, gives FIFO order within a priority
    taskforge:{q}:wake         list    one token per enqueue, so idle workers block instead of poll
    taskforge:{q}:done:<id>    list    exists once a job is finished and someone waits on it
    taskforge:{q}:claim:<tok>  list    ids one dequeue claimed, until the claim ends (TTL: the lease)
    taskforge:{q}:limits       hash    task -> "rate:period_ms:concurrency", for limited tasks
    taskforge:{q}:pending:<t>  zset    ready jobs of limited task t (scored like pending)
    taskforge:{q}:active:<t>   set     running jobs of limited task t (bounded by its concurrency)
    taskforge:{q}:rate:<t>     zset    start times of task t within its rate window (TTL: the window)
    taskforge:{q}:unique:<h>   string  the unfinished job holding a unique key (TTL: unique_for)
    taskforge:{q}:tick:<t>:<ms> string a periodic tick already enqueued (TTL: two periods)
    taskforge:{q}:stats:<min>  hash    runs succeeded and failed in one minute (TTL: two hours)
    taskforge:queues           set     every queue name ever enqueued to (for status and purge)
    taskforge:workers          zset    worker id -> last heartbeat (ms)
    taskforge:worker:<id>      hash    one live worker's description; expires with its heartbeat

Unfinished job hashes never expire: a job waiting for a worker that is down
for a week still runs when it comes back.  Finished ones expire after
``retention`` (``dead_retention`` for dead ones), and the dead-letter set is
trimmed by age, so nothing grows without bound.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ConfigurationError

ROOT = "taskforge"
QUEUES = f"{ROOT}:queues"
WORKERS = f"{ROOT}:workers"
MAX_QUEUE_NAME = 200


def worker_key(worker_id: str) -> str:
    return f"{ROOT}:worker:{worker_id}"


def validate_queue_name(name: object) -> str:
    """Reject names that would break the hash-tag layout or be unreadable in tools.

    ``{`` and ``}`` would change which part of the key Redis hashes, and a
    queue's keys would scatter over slots; control characters make keys
    impossible to type in redis-cli.
    """
    if not isinstance(name, str) or not name:
        raise ConfigurationError(f"queue name {name!r}: use a non-empty string")
    if len(name) > MAX_QUEUE_NAME:
        raise ConfigurationError(f"queue name of {len(name)} characters: the limit is {MAX_QUEUE_NAME}")
    bad = [c for c in name if c in "{}" or not c.isprintable() or c.isspace()]
    if bad:
        raise ConfigurationError(
            f"queue name {name!r} contains {bad[0]!r}: use letters, digits and punctuation "
            "other than '{' and '}', without spaces"
        )
    return name


@dataclass(frozen=True)
class QueueKeys:
    """The keys of one queue; ``prefix`` is what Lua scripts build job keys from."""

    name: str

    @property
    def prefix(self) -> str:
        return f"{ROOT}:{{{self.name}}}:"

    def job(self, job_id: str) -> str:
        return f"{self.prefix}job:{job_id}"

    def done(self, job_id: str) -> str:
        return f"{self.prefix}done:{job_id}"

    @property
    def pending(self) -> str:
        return self.prefix + "pending"

    @property
    def scheduled(self) -> str:
        return self.prefix + "scheduled"

    @property
    def running(self) -> str:
        return self.prefix + "running"

    @property
    def dead(self) -> str:
        return self.prefix + "dead"

    @property
    def limits(self) -> str:
        return self.prefix + "limits"

    def group_pending(self, task: str) -> str:
        return f"{self.prefix}pending:{task}"

    def unique(self, digest: str) -> str:
        return f"{self.prefix}unique:{digest}"

    def tick(self, task: str, tick_ms: int) -> str:
        return f"{self.prefix}tick:{task}:{tick_ms}"

    def stats(self, minute: int) -> str:
        """Outcome counts of one minute (ms since the epoch // 60000), written by succeed and fail."""
        return f"{self.prefix}stats:{minute}"

    @property
    def seq(self) -> str:
        return self.prefix + "seq"

    @property
    def wake(self) -> str:
        return self.prefix + "wake"
