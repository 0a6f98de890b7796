"""Which new job is plain, and what the plain enqueue script (``lua/enqueue_plain.lua``) is sent for it.

Redis runs a script's whole text on every call: enqueue.lua handles every
feature a job may use, and carrying it cost a plain ``.delay()`` about a
third of its Redis time. A job that uses none of them goes to a script of
its own, which stores exactly the same record, pending entry, index entry
and wake; the fields it stores come from ``record.ENQUEUE``, the one
declaration both scripts follow.
"""

from __future__ import annotations

from typing import Any

from .keys import QueueKeys
from .record import ENQUEUE, NewJob

# The stored slots a plain job sends as (field, value) pairs: all but the task, which the
# script reads on its own for the job's index entry.
_STORED = tuple((slot.stored.value, slot.value) for slot in ENQUEUE if slot.stored and slot.name != "task")


def is_plain(job: NewJob) -> bool:
    """Whether ``job`` uses none of the features only enqueue.lua handles (see enqueue_plain.lua)."""
    return not (
        job.inherit
        or job.limits
        or job.unique_digest
        or job.tick_ms is not None
        or job.expires_at_ms is not None
        or job.expires_in_ms
        or job.key
        or job.debounce
        or job.key_limits
    )


def plain_call(job: NewJob, q: QueueKeys) -> dict[str, Any]:
    """The keyword arguments of ``calls.enqueue_plain`` for ``job``.

    The fields are those enqueue.lua would store as they are, each unless
    '' (a default priority or max_attempts is left out), then the job's own
    plain fields (headers, retry filters).
    """
    fields = [(name, value) for name, value_of in _STORED if (value := value_of(job, q)) != ""]
    return {
        "job_id": job.id,
        "task": job.task,
        "priority": str(job.priority),
        "due": "" if job.due_ms is None else job.due_ms,
        "delay": job.delay_ms,
        "payload": job.payload,
        "fields": fields + list((job.fields or {}).items()),
    }
