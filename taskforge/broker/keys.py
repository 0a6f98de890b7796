"""Every Redis key taskforge writes, built in one place.

All keys of one queue share the hash tag ``{<queue>}``, so every Lua script
touches a single slot and runs unchanged on a Redis Cluster (what does need
care there, across queues, is in ``slots.py``). The keyspace, with each
key's type, contents and lifetime, is the table in ``lua/README.md``.
Producers never build a key: they hand the broker a unique job's digest or a
periodic tick's time, and the broker builds the key from it here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

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
class BatchKeys:
    """The keys of a queue's big enqueues, sent in slices (``batches.py``; enqueue.lua names their
    staged slices, ``staged:<batch>:<i>``)."""

    queue: QueueKeys

    def batch(self, batch: str) -> str:
        """A big enqueue's record: how far its commit got, and the answers a lost reply would miss."""
        return f"{self.queue.prefix}batch:{batch}"

    @property
    def batches(self) -> str:
        """Big enqueues by when they last moved: a worker finishes (or drops) one whose producer stopped."""
        return self.queue.prefix + "batches"


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

    def stream(self, job_id: str) -> str:
        """The job's stream (``current_job().stream``): a Redis Stream that lives and goes with its record."""
        return f"{self.prefix}stream:{job_id}"

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

    @property
    def turns(self) -> str:
        """The lanes with ready keyed jobs, each once, in the order of their turns (lua/lib/lanes.lua)."""
        return self.prefix + "turns"

    @property
    def held(self) -> str:
        """Lanes' heads held back by their task's limits, scored by when the claim looks at them again."""
        return self.prefix + "held"

    @property
    def held_head(self) -> str:
        """Lane -> its held head (as ``held`` names it)."""
        return self.prefix + "held_head"

    @property
    def lane_size(self) -> str:
        """Lane -> how many jobs wait in it, its head included."""
        return self.prefix + "lane_size"

    @property
    def key_turns(self) -> str:
        """Key's lane -> "<waiting>:<last turn>" for keyed jobs of tasks without limits."""
        return self.prefix + "key_turns"

    @property
    def key_limits(self) -> str:
        return self.prefix + "key_limits"

    @property
    def lane_jobs(self) -> str:
        """How many jobs wait in lanes (a counter the scripts keep)."""
        return self.prefix + "lane_jobs"

    def unique(self, digest: str) -> str:
        return f"{self.prefix}unique:{digest}"

    def tick(self, task: str, tick_ms: int) -> str:
        return f"{self.prefix}tick:{task}:{tick_ms}"

    def stats(self, minute: int, of: Literal["stats", "timings"] = "stats") -> str:
        """A minute's figures (minute: ms since the epoch // 60000): its outcome counts, written by succeed
        and fail, or ``of="timings"`` its wait and run time histograms per task (``timings.py``), written by
        the clients' tallies. One method for both keeps ``QueueKeys`` within the size of a role."""
        return f"{self.prefix}{of}:{minute}"

    @property
    def seq(self) -> str:
        return self.prefix + "seq"

    @property
    def wake(self) -> str:
        return self.prefix + "wake"

    @property
    def paused(self) -> str:
        """Present while the queue is paused (``app.pause``): its value, when, in ms."""
        return self.prefix + "paused"

    @property
    def outbox(self) -> str:
        """Reports of workflow steps that ended here, not yet delivered: job id -> workflow id."""
        return self.prefix + "outbox"

    @property
    def route(self) -> str:
        """The key a script call declares, so a cluster client sends it to this queue's slot."""
        return self.pending


def search_index(queue: str) -> str:
    """The queue's search index (lua/lib/index.lua): entries per job, per task, per key, per final state.

    A function beside ``QueueKeys`` rather than one more of its names: what
    reads it (``index.py``) is the search, not the queue's transitions.
    """
    return f"{QueueKeys(queue).prefix}index"


# Workflows span queues, so their keys carry a tag of their own: each
# workflow's under {wf:<id>}, and the index of all of them under {workflows}.
WORKFLOW_INDEX = f"{ROOT}:{{workflows}}:"
WORKFLOW_STATES = ("running", "succeeded", "dead", "cancelled")


def workflow_index(state: str) -> str:
    """Workflow ids by state: running (score: created), the ended ones (score: finished), in ms."""
    return f"{WORKFLOW_INDEX}{state}"


WORKFLOW_LAUNCHING = f"{WORKFLOW_INDEX}launching"  # stored, first steps not yet confirmed sent
WORKFLOW_RESUMING = f"{WORKFLOW_INDEX}resuming"  # a resume begun, its steps not yet confirmed sent


@dataclass(frozen=True)
class WorkflowKeys:
    """The keys of one workflow: its record and the sets that count its steps (lua/lib/workflows.lua)."""

    name: str  # the workflow's id

    @property
    def prefix(self) -> str:
        return f"{ROOT}:{{wf:{self.name}}}:"

    @property
    def record(self) -> str:
        return self.prefix + "record"

    @property
    def done(self) -> str:
        return self.prefix + "done"

    @property
    def route(self) -> str:
        return self.record


def deferred_key(q: QueueKeys) -> str:
    """Jobs waiting for the jobs they depend on (``depends_on``), scored by when last looked at.

    A function rather than a ``QueueKeys`` property: the class is at its size limit, and only
    the dependencies, the counts and the damage check name this key.
    """
    return q.prefix + "deferred"
