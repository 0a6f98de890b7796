"""A batch too big for one script call, stored in slices that keep it all or none.

A script holds Redis for as long as it runs: one ``delay_many`` of 250,000
jobs in one call kept every other client waiting for seconds. So a call of
more than ``SLICE_JOBS`` jobs (or ``SLICE_BYTES`` of them) goes in slices,
each a call of its own, and keeps its promise in two phases (enqueue.lua,
"Slices"):

1. Staging: each slice is kept as it is, in a list of the queue's that no
   worker reads, which expires after ``STAGE_TTL_MS``. A producer that dies
   or loses its connection here leaves nothing visible, and its slices go
   by themselves.
2. Commit: the first commit steps keep the slices from expiring (a few
   hundred per call), then one checks ``max_size`` for the whole batch and
   reserves room for it; from then on the batch will be stored whole. Each
   step stores the next slice; a producer that dies midway leaves the batch
   listed in the queue's ``batches``, and a worker finishes it
   (``finish_batches``, from its reclaim duty) once it has not moved for
   ``STALE_MS``.

This module knows only the calls and their answers; ``Jobs`` and
``AsyncJobs`` send them.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from typing import Any, NamedTuple

from ..errors import TaskforgeError
from .calls import ScriptCall
from .keys import BatchKeys, QueueKeys
from .record import NewJob, enqueue_array

# Jobs per script call: a job costs the enqueue script 15 to 25 us of Redis
# time (benchmarks/slowlog.py), so 250 stay well inside the 50 ms budget on a
# busy machine. Bytes bound a slice of big jobs the same way.
SLICE_JOBS = 250
SLICE_BYTES = 512 * 1024
# How long staged slices wait for their commit before they expire.
STAGE_TTL_MS = 3_600_000
# Staged slices a commit step keeps from expiring (or a drop unlinks) before the batch is committed:
# two commands each, so a million jobs' 4,000 slices take 16 short steps.
KEEP_STEP = 256
# Slices staged per round trip (each its own call: Redis serves others between them).
STAGE_GROUP = 16
# A committed batch not moved for this long is finished by a worker.
STALE_MS = 30_000
# Slices a worker's sweep stores per reclaim round, so its other duties keep their pace.
FINISH_SLICES = 40


class CommitReply(NamedTuple):
    """One commit step's answer: ``kind`` KEPT (``at`` slices kept from expiring), SLICE (slice ``at``
    stored, ``ids``), DONE, FULL (``size``), GONE; a worker's or a drop's: FRESH, DROPPING, DROPPED."""

    kind: str
    at: int = -1
    ids: list[str] = []
    size: int = 0


def decode_commit(raw: list[Any]) -> CommitReply:
    kind = raw[0].decode() if isinstance(raw[0], bytes) else str(raw[0])
    if kind == "SLICE":
        return CommitReply(kind, int(raw[1]), [i.decode() for i in raw[2:]])
    if kind == "KEPT":
        return CommitReply(kind, int(raw[1]))
    if kind == "FULL":
        return CommitReply(kind, size=int(raw[1]))
    return CommitReply(kind)


def split(jobs: Sequence[NewJob]) -> list[list[NewJob]] | None:
    """``jobs`` in slices, or None when one call holds them all (today's path: one round trip)."""
    size = sum(len(job.payload) for job in jobs)
    if len(jobs) <= SLICE_JOBS and size <= SLICE_BYTES:
        return None
    parts: list[list[NewJob]] = [[]]
    held = 0
    for job in jobs:
        if parts[-1] and (len(parts[-1]) >= SLICE_JOBS or held + len(job.payload) > SLICE_BYTES):
            parts.append([])
            held = 0
        parts[-1].append(job)
        held += len(job.payload)
    return parts


def stage(q: QueueKeys, batch: str, index: int, jobs: Sequence[NewJob]) -> ScriptCall[None]:
    args: list[Any] = [0, f"stage:{batch}:{index}:{STAGE_TTL_MS}"]
    for job in jobs:
        args += [enqueue_array(job, q), job.payload]
    return ScriptCall("enqueue", q, args, lambda raw: None)


def commit(q: QueueKeys, batch: str, slices: int, total: int, max_size: int) -> ScriptCall[CommitReply]:
    return ScriptCall("enqueue", q, [max_size, f"commit:{batch}:{slices}:{total}:{KEEP_STEP}"], decode_commit)


def finish(q: QueueKeys, batch: str, stale_ms: int) -> ScriptCall[CommitReply]:
    """A worker's step of a batch not moved for ``stale_ms`` (else FRESH: its producer is at it)."""
    return ScriptCall("enqueue", q, [0, f"finish:{batch}:{stale_ms}:0:{KEEP_STEP}"], decode_commit)


class Batch:
    """One sliced enqueue: its calls in order, and the ids its commit steps answered."""

    def __init__(self, queue: str, parts: list[list[NewJob]], max_size: int) -> None:
        self.q = QueueKeys(queue)
        self.name = uuid.uuid4().hex
        self.parts = parts
        self.total = sum(len(part) for part in parts)
        self.max_size = max_size
        self.answers: dict[int, list[str]] = {}

    def staging(self) -> list[list[ScriptCall[None]]]:
        """The staging calls, ``STAGE_GROUP`` per round trip."""
        calls = [stage(self.q, self.name, i, part) for i, part in enumerate(self.parts)]
        return [calls[i : i + STAGE_GROUP] for i in range(0, len(calls), STAGE_GROUP)]

    def commit(self) -> ScriptCall[CommitReply]:
        return commit(self.q, self.name, len(self.parts), self.total, self.max_size)

    def take(self, reply: CommitReply) -> bool:
        """Note a commit step's answer: True when the batch is stored whole (KEPT, SLICE: not yet)."""
        if reply.kind == "SLICE":
            self.answers[reply.at] = reply.ids
        return reply.kind == "DONE"

    def drop(self) -> ScriptCall[CommitReply]:
        """A step that drops this batch, refused or broken before its commit (DROPPING until DROPPED)."""
        return finish(self.q, self.name, 0)

    def expired(self) -> TaskforgeError:
        return TaskforgeError(
            f"the {self.total} jobs for queue {self.q.name!r} were staged but some expired before their commit "
            f"({STAGE_TTL_MS // 1000} s); nothing was stored"
        )

    def missing(self) -> tuple[str, list[str]]:
        """The batch record's key and the fields of slices whose answer this producer never read
        (a lost reply, or a worker's sweep stored them): HMGET them, then ``ids``."""
        fields = [f"out:{i}" for i in range(len(self.parts)) if i not in self.answers]
        return BatchKeys(self.q).batch(self.name), fields

    def ids(self, found: Sequence[Any] = ()) -> list[str]:
        """Every job's answer in call order; ``found``: the HMGET of ``missing``'s fields
        (a slice stored nothing different from its own ids when its field is absent)."""
        late = iter(found)
        out: list[str] = []
        for i, part in enumerate(self.parts):
            answer = self.answers.get(i)
            if answer is None:
                raw = next(late, None)
                answer = json.loads(raw) if raw else [job.id for job in part]
            out += answer
        return out
