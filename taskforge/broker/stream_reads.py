"""Reading a job's stream, for ``JobHandle.stream``: one ``XREAD`` slice, and the job's state when it was empty.

Shared by the sync (``jobs.Jobs``) and the awaited (``aio.AsyncJobs``)
readers, which differ only in how they wait for Redis.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import redis

from ..errors import CorruptJob

STREAM_BATCH = 200  # items one XREAD returns at most: a reader far behind catches up in few round trips


@dataclass(frozen=True)
class StreamRead:
    """What one read of a job's stream found.

    ``items``: (entry id, msgpack) pairs in the stream's order, after the id
    asked for. ``state``: when no item came, the job's state read just after
    (None: no record of the job), so that a reader knows whether to wait on;
    "" when items came.
    """

    items: list[tuple[str, bytes]]
    state: str | None = ""


def block_ms(block: float) -> int | None:
    """XREAD's BLOCK for a wait of ``block`` seconds: None (do not block) for 0, else at least 1 ms."""
    return None if block <= 0 else max(1, int(block * 1000))


def entries(reply: Any) -> list[tuple[str, bytes]]:
    """The (entry id, item) pairs of an XREAD reply on one stream; an entry without its item field is skipped."""
    found: list[tuple[str, bytes]] = []
    for _stream, rows in reply or ():
        for entry, fields in rows:
            entry_id = entry.decode() if isinstance(entry, bytes) else str(entry)
            item = (fields or {}).get(b"v")
            if item is not None:
                found.append((entry_id, item))
    return found


def state_text(raw: Any) -> str | None:
    """The state field read by HGET: None for no record; a record without one reads as pending."""
    if raw is None:
        return None
    return raw.decode(errors="replace") if isinstance(raw, bytes) else str(raw)


def damaged(job_id: str, exc: redis.ResponseError) -> Exception:
    """A wrong-type stream or record as ``CorruptJob``; any other error as it was."""
    if "WRONGTYPE" not in str(exc):
        return exc
    return CorruptJob(f"the stream or the record of job {job_id} holds a value of the wrong type: {exc}")
