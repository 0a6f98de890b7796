"""What the Lua scripts answer, as types, decoded in one place.

Each script's header (``lua/<name>.lua``) documents its reply layout; the
decoder beside each type here is the only Python that reads that layout.
A claim's rows are the job record's: ``record.ClaimRow`` declares them.
"""

from __future__ import annotations

import enum
from typing import Any, NamedTuple

from .record import Claim, ClaimRow


class EnqueueRefused(NamedTuple):
    """enqueue refused the batch: the queue already holds ``size`` unfinished jobs."""

    size: int


def decode_enqueue(raw: list[Any]) -> list[str] | EnqueueRefused:
    """Per job: its id, the id of the unfinished job holding its unique lock, or '' (tick taken)."""
    if raw[0] == b"OK":
        return [i.decode() for i in raw[1:]]
    return EnqueueRefused(int(raw[1]))


class ClaimReply(NamedTuple):
    """A dequeue as Redis answered it, before the broker vets each row."""

    dropped: int  # ids without a job record, dropped from the queue
    wait_ms: int  # nothing claimed: ms until the next job is due (-1: none)
    rows: list[ClaimRow]


CLAIM_ROW = len(ClaimRow._fields)


def decode_claims(raw: list[Any]) -> ClaimReply:
    rows = raw[2:]
    return ClaimReply(
        int(raw[0]),
        int(raw[1]),
        [ClaimRow(*rows[i : i + CLAIM_ROW]) for i in range(0, len(rows), CLAIM_ROW)],
    )


class ClaimBatch(NamedTuple):
    """What ``Claims.dequeue`` returns: the claims and, when there are none, when to ask again.

    ``next_due``: seconds until the next scheduled job is due (None: nothing
    scheduled; 0: try again now). With claims (a dequeue's): 0 when more
    may be ready, None when nothing else is, so a lane woken with a job
    wakes a sibling to claim only when there is something to claim.
    """

    claims: list[Claim]
    next_due: float | None


class SucceedReply(NamedTuple):
    done: bool  # False: the claim was no longer ours (fenced), nothing written
    next: ClaimReply | None  # the claim of the next job, when one was asked for


def decode_succeed(raw: Any) -> SucceedReply:
    if isinstance(raw, list):
        return SucceedReply(bool(raw[0]), decode_claims(raw[1:]))
    return SucceedReply(bool(raw), None)


class SettleReply(NamedTuple):
    done: list[bool]  # per result sent, in order: False when fenced (nothing written)
    next: ClaimReply | None  # the claim of the next jobs, when one was asked for


def decode_settle(raw: Any) -> SettleReply:
    oks = raw[0].decode() if isinstance(raw[0], bytes) else str(raw[0])
    return SettleReply([ok == "1" for ok in oks], decode_claims(raw[1:]) if len(raw) > 1 else None)


class FailOutcome(str, enum.Enum):
    """What a failed run became; compares equal to its value ('retrying' == FailOutcome.RETRYING)."""

    FENCED = "fenced"  # the claim was no longer ours: nothing written
    RETRYING = "retrying"
    DEAD = "dead"

    def __str__(self) -> str:
        return self.value


def decode_fail(raw: Any) -> FailOutcome:
    return (FailOutcome.FENCED, FailOutcome.RETRYING, FailOutcome.DEAD)[int(raw)]


class CancelOutcome(enum.IntEnum):
    MISSING = -1  # no such job
    TOO_LATE = 0  # running or finished
    CANCELLED = 1


class AbortOutcome(enum.IntEnum):
    MISSING = -1  # no such job
    FINISHED = 0
    CANCELLED = 1  # had not started: cancelled now
    STOPPING = 2  # running: its supervisor kills it at its next lease renewal


class ExtendResult(NamedTuple):
    lost: list[str]  # claims another worker now holds (the lease expired and the job was reclaimed)
    aborted: list[str]  # still ours, but someone asked to abort them


def decode_extend(raw: list[Any]) -> ExtendResult:
    ids = [i.decode() for i in raw]
    cut = ids.index("|")
    return ExtendResult(ids[:cut], ids[cut + 1 :])


class ReclaimResult(NamedTuple):
    reclaimed: list[str]  # back in line
    buried: list[str]  # dead: no attempts left, or a junk attempts field
    dropped: int  # ids without a job record


def decode_reclaim(raw: list[Any]) -> ReclaimResult:
    first = raw.index(b"|")
    second = raw.index(b"|", first + 1)
    return ReclaimResult(
        [i.decode(errors="replace") for i in raw[:first]],
        [i.decode(errors="replace") for i in raw[first + 1 : second]],
        int(raw[second + 1]),
    )


class QueueHead(NamedTuple):
    """What peek saw: the best ready job's score (None: none ready), seconds until one is due (None: none)."""

    score: float | None
    next_due: float | None


def decode_peek(raw: list[Any]) -> QueueHead:
    head, wait = float(raw[0]), int(raw[1])
    return QueueHead(None if head < 0 else head, None if wait < 0 else wait / 1000)


def decode_ids(raw: list[Any]) -> list[str]:
    return [i.decode() for i in raw]


def decode_entry(raw: Any) -> str | None:
    """A stream entry's id (``stream.lua``), or None: the run no longer holds the job (0)."""
    if isinstance(raw, bytes):
        return raw.decode()
    return raw if isinstance(raw, str) and raw else None


def decode_state(raw: Any) -> str | None:
    return raw.decode(errors="replace") if raw else None  # junk: not a state, read as dead


def text(raw: Any) -> str:
    """A script's string reply as text ('' for none)."""
    return raw.decode(errors="replace") if isinstance(raw, bytes) else str(raw or "")


class StepToSend(NamedTuple):
    """A workflow step whose turn came: its index, its spec (msgpack) and the results it receives.

    ``held``: how many results the script left in the workflow's record
    rather than answer them in one long call (a chord's body of more than
    2,000 members); the sender reads them in slices (``delivery.with_inputs``).
    """

    step: int
    spec: bytes
    inputs: list[bytes]
    held: int = 0


class WorkflowReply(NamedTuple):
    """What a workflow script answers: the workflow's state, steps to send, steps to cancel."""

    state: str  # running, succeeded, dead, cancelled; 'gone' when there is no such workflow
    ready: list[StepToSend]
    cancel: list[tuple[int, str]]  # (index, queue) of steps to stop: the workflow ended
    settle: bool = False  # it ended: once the steps are sent and stopped, settle it (workflow_settle)
    was_running: bool = False  # workflow_cancel: it was running, and now is cancelled


def _ready(raw: list[Any]) -> list[StepToSend]:
    return [_step(entry) for entry in raw]


def _step(entry: list[Any]) -> StepToSend:
    if len(entry) == 3 and isinstance(entry[2], int):  # {index, spec, count}: results are bytes, never integers
        return StepToSend(int(entry[0]), entry[1], [], int(entry[2]))
    return StepToSend(int(entry[0]), entry[1], list(entry[2:]))


def _cancel(raw: list[Any]) -> list[tuple[int, str]]:
    return [(int(raw[i]), raw[i + 1].decode()) for i in range(0, len(raw), 2)]


def decode_workflow_report(raw: list[Any]) -> WorkflowReply:
    return WorkflowReply(raw[0].decode(), _ready(raw[1]), _cancel(raw[2]), bool(raw[3]))


def decode_workflow_cancel(raw: list[Any]) -> WorkflowReply:
    was = int(raw[0])
    state = "gone" if was < 0 else "cancelled" if was else "ended"
    return WorkflowReply(state, [], _cancel(raw[1]), bool(raw[2]), was == 1)


def decode_workflow_flight(raw: list[Any]) -> tuple[WorkflowReply, str]:
    cursor = raw[2].decode() if isinstance(raw[2], bytes) else str(raw[2])
    return WorkflowReply(raw[0].decode(), _ready(raw[1]), []), cursor


class ResumeReply(NamedTuple):
    """What workflow_resume answers: the state it found, the steps free to go, where they are."""

    before: str  # dead (now running), running, succeeded, cancelled; 'gone' when there is no such workflow
    ready: list[StepToSend]
    replan: list[tuple[int, str]]  # (index, queue) of those steps
    on_failure: tuple[int, str] | None  # its on_failure step, whose finished record is dropped


def decode_workflow_resume(raw: list[Any]) -> ResumeReply:
    on_failure = (int(raw[3][0]), raw[3][1].decode()) if raw[3] else None
    return ResumeReply(raw[0].decode(), _ready(raw[1]), _cancel(raw[2]), on_failure)


def decode_probe(raw: Any) -> tuple[bool, bool, int]:
    """``queue_probe``'s reply: (holds jobs, has stats in the window, jobs expired in it)."""
    jobs, active, expired = raw
    return bool(int(jobs)), bool(int(active)), int(expired)


def decode_forget(raw: Any) -> tuple[str, str, int]:
    """``forget``'s reply: (what still holds a job, or ''; the next SCAN cursor; keys deleted)."""
    holding, cursor, deleted = raw
    return _text(holding), _text(cursor), int(deleted)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
