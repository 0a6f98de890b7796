"""Turning the rows a claim returned into ``Claim`` objects, dead-lettering those that cannot run.

``Claims`` holds one. A row whose id is not text, whose record holds junk
in its state or attempts, or whose body cannot be decoded is recorded dead
here with the reason, so a worker never sees it and never crashes on it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from ..errors import CorruptPayload, class_path
from ..job import FailureKind
from ..serialization import loads_call
from .record import Claim, ClaimRow, claim_of
from .replies import ClaimBatch, ClaimReply, FailOutcome

log = logging.getLogger("taskforge.broker")


def _why_not(row: ClaimRow) -> str | None:
    """Why a claimed row cannot run (the error it is dead-lettered with), or None when it can."""
    if row.damage:
        field, _, value = row.damage.decode(errors="replace").partition(" ")
        return (
            f"CorruptJob: its {field} field holds {value[:60]!r}, which "
            "taskforge never writes; it was dead-lettered, not run"
        )
    return None


# Claims.fail: queue, job id, token, error, traceback, retry_in, kind, error_type.
Fail = Callable[[str, str | bytes, str, str, str, float | None, FailureKind, str | None], FailOutcome]


class ClaimVetting:
    """Dead-letters, through ``fail``, the claimed rows that cannot run."""

    def __init__(self, fail: Fail) -> None:
        self.fail = fail

    def vetted(self, queue: str, token: str, reply: ClaimReply) -> ClaimBatch:
        """The claims of ``reply`` that can run; see ``Claims.dequeue``."""
        if reply.dropped:
            log.warning(
                "dropped %d ids without a job record from %s (deleted or expired by something else)",
                reply.dropped,
                queue,
            )
        claims = [c for c in (self._claim(queue, token, row) for row in reply.rows) if c is not None]
        if claims:
            return ClaimBatch(claims, 0.0 if reply.wait_ms >= 0 else None)
        if reply.rows:  # claimed only corrupt jobs: more may be ready
            return ClaimBatch([], 0.0)
        return ClaimBatch([], None if reply.wait_ms < 0 else reply.wait_ms / 1000)

    def _claim(self, queue: str, token: str, row: ClaimRow) -> Claim | None:
        try:
            job_id = row.id.decode()
        except UnicodeDecodeError:
            # Job ids are str everywhere else (handles, hooks, the supervisor's messages).
            self.fail(
                queue,
                row.id,
                token,
                f"CorruptJob: the job id {row.id[:60]!r} is not UTF-8 text, "
                "so no worker can report on it; it was dead-lettered, not run",
                "",
                None,
                FailureKind.CORRUPT,
                None,
            )
            return None
        why = _why_not(row)
        error_type = None  # CorruptJob, the kind's own
        args: tuple[Any, ...] = ()
        kwargs: dict[str, Any] = {}
        if why is None:
            try:
                if not row.task:
                    raise CorruptPayload("the job record has no task name")
                args, kwargs = loads_call(row.payload)
            except CorruptPayload as exc:
                why = f"CorruptPayload: {exc}"
                error_type = class_path(exc)
        if why is not None:
            self.fail(queue, job_id, token, why, "", None, FailureKind.CORRUPT, error_type)
            return None
        return claim_of(row, job_id, queue, token, (args, kwargs))
