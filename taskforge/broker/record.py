"""The job record: the fields of a job's hash, declared once, and what they decode to.

The Lua scripts write these fields (``lua/enqueue.lua`` creates a record,
``lua/_lib.lua`` moves it between states); ``tests/broker/test_record.py``
checks that the field names the scripts use are exactly the ones declared
here, so a field renamed on one side only fails a test instead of reading as
empty on the other.
"""

from __future__ import annotations

import enum
import json
import secrets
from dataclasses import dataclass
from typing import Any

from ..errors import CorruptPayload, error_type_of_kind
from ..job import FailureKind, JobInfo, JobState, Priority, ms_to_datetime
from ..serialization import loads, loads_call


class Field(str, enum.Enum):
    """One field of a job's hash; the value is the name Redis stores."""

    ID = "id"
    TASK = "task"
    PAYLOAD = "payload"  # msgpack (args, kwargs)
    PRIORITY = "priority"  # 0 low .. 3 critical
    MAX_ATTEMPTS = "max_attempts"
    TIMEOUT = "timeout"  # ms, '' = none
    ATTEMPTS = "attempts"  # runs started so far
    CREATED_AT = "created_at"  # ms since the epoch, Redis's clock, like every time below
    SCHEDULED_AT = "scheduled_at"
    STARTED_AT = "started_at"
    FINISHED_AT = "finished_at"
    STATE = "state"  # a JobState value
    SEQ = "seq"  # enqueue sequence: its place in line within its priority
    TOKEN = "token"  # the claim token while running, '' otherwise (the fencing rule)
    OUTCOME_TOKEN = "outcome_token"  # the claim token of the succeed/fail report recorded last (lost replies)
    INHERIT = "inherit"  # '1': sent by name; the worker's task definition supplies options
    GROUP = "group"  # the task name, for a rate- or concurrency-limited task
    UNIQUE = "unique"  # the unique lock key this job holds
    WAITING = "waiting"  # '1': someone waits in JobHandle.result(); finishing pushes the done list
    ABORT = "abort"  # '1': JobHandle.abort() asked a running job to stop
    RESULT = "result"  # msgpack
    ERROR = "error"  # why the latest attempt failed, in words
    FAILURE = "failure"  # the same as a FailureKind value, written beside every error
    ERROR_TYPE = "error_type"  # the class path of that error ("builtins.ValueError"), written beside it
    TRACEBACK = "traceback"
    PROGRESS = "progress"  # 0..1
    PROGRESS_MESSAGE = "progress_message"
    PROGRESS_META = "progress_meta"  # msgpack: set_progress(..., meta=); '' = none
    WORKFLOW = "workflow"  # the id of the workflow this job is a step of
    EXPIRES = "expires"  # ms: not started by then, it ends cancelled ("expired")
    KEEP_MS = "keep_ms"  # the retention of a job that expires (the claim script has no app to ask)
    HEADERS = "headers"  # a JSON object of strings set by producer hooks (trace context); absent: none
    PASSES = "passes"  # times a worker that does not know the task gave it back for one that does

    @property
    def key(self) -> bytes:
        """The field as redis-py returns it in a hash."""
        return self.value.encode()


RECORD_FIELDS = frozenset(field.value for field in Field)


@dataclass(frozen=True)
class NewJob:
    """A job as the producer hands it to ``enqueue``: already serialized.

    Keys are built by the broker alone: a unique job carries the digest of
    its unique key, a periodic tick the time of its tick.
    """

    id: str
    task: str
    payload: bytes
    priority: int
    max_attempts: int
    timeout_ms: int | None = None
    due_ms: int | None = None  # absolute, producer's clock (apply_at)
    delay_ms: int = 0  # relative, resolved on Redis's clock (apply_in, retries)
    inherit: bool = False  # sent by name: the worker's task definition supplies max_attempts, timeout
    limits: str = ""  # "rate:period_ms:concurrency" for a rate- or concurrency-limited task
    unique_digest: str = ""  # a unique job: the digest of its task and unique key ('' = not unique)
    lock_ttl_ms: int = 0  # TTL of the unique lock or periodic tick key
    tick_ms: int | None = None  # a periodic tick (ms since the epoch): enqueued once across all workers
    workflow: str = ""  # the workflow this job is a step of; its id is then fixed by the workflow
    expires_at_ms: int | None = None  # absolute, producer's clock (an aware datetime)
    expires_in_ms: int = 0  # relative to the enqueue, on Redis's clock
    fields: dict[str, str] | None = None  # rarely used plain fields stored as they are (retry filters, keep_ms)


@dataclass(frozen=True)
class Claim:
    """A job a worker now owns until its lease runs out or it reports back."""

    id: str
    queue: str
    token: str
    task: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    attempts: int
    max_attempts: int
    timeout: float | None
    priority: int
    inherit: bool = False
    workflow: str = ""  # a workflow step: its outcome is reported to that workflow
    headers: dict[str, str] | None = None  # the job's headers; None when it was sent without any


def encode_headers(headers: dict[str, str]) -> str:
    """The ``headers`` field: JSON, so that any tool reading the record can read it too."""
    return json.dumps(headers, separators=(",", ":"), ensure_ascii=False)


def decode_headers(raw: bytes | None) -> dict[str, str] | None:
    """A job's headers, or None for none; junk (written by something else) reads as none.

    Headers are metadata (trace context), never what a task computes with, so
    a damaged field costs the job its trace, not its run.
    """
    if not raw:
        return None
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    if type(value) is not dict or not all(type(v) is str for v in value.values()):
        return None
    return value


def new_token() -> str:
    return secrets.token_hex(8)


def _text(fields: dict[bytes, bytes], field: Field) -> str | None:
    value = fields.get(field.key)
    return value.decode(errors="replace") if value else None


def _number(fields: dict[bytes, bytes], field: Field) -> int | None:
    value = fields.get(field.key)
    try:
        return int(value) if value else None
    except ValueError:
        return None


def _fraction(fields: dict[bytes, bytes], field: Field) -> float | None:
    """A progress fraction; junk written by something else shows as no progress rather than raising."""
    try:
        value = float(fields.get(field.key) or "nan")
    except ValueError:
        return None
    return value if 0.0 <= value <= 1.0 else None


def _priority(fields: dict[bytes, bytes]) -> Priority:
    try:
        return Priority(_number(fields, Field.PRIORITY) or 0)
    except ValueError:
        return Priority.NORMAL


def _state(fields: dict[bytes, bytes]) -> tuple[JobState, str | None]:
    """The state, and an error to show when the field holds what taskforge never writes."""
    raw = _text(fields, Field.STATE)
    try:
        return JobState(raw or "pending"), None
    except ValueError:
        return JobState.DEAD, f"unknown state {raw!r} in the job record"


def job_info(job_id: str, queue: str, fields: dict[bytes, bytes]) -> JobInfo:
    """Decode a raw job hash; a corrupt payload shows as an error, never raises."""
    error = _text(fields, Field.ERROR)
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = {}
    try:
        args, kwargs = loads_call(fields.get(Field.PAYLOAD.key, b""))
    except CorruptPayload as exc:
        error = error or f"CorruptPayload: {exc}"
    result = None
    if Field.RESULT.key in fields:
        try:
            result = loads(fields[Field.RESULT.key])
        except CorruptPayload as exc:
            error = error or f"CorruptPayload: result: {exc}"
    state, state_error = _state(fields)
    failure = FailureKind.decode(_text(fields, Field.FAILURE))
    return JobInfo(
        id=job_id,
        task=_text(fields, Field.TASK) or "",
        queue=queue,
        args=args,
        kwargs=kwargs,
        priority=_priority(fields),
        state=state,
        attempts=_number(fields, Field.ATTEMPTS) or 0,
        max_attempts=_number(fields, Field.MAX_ATTEMPTS) or 0,
        created_at=ms_to_datetime(_number(fields, Field.CREATED_AT)),
        scheduled_at=ms_to_datetime(_number(fields, Field.SCHEDULED_AT)),
        started_at=ms_to_datetime(_number(fields, Field.STARTED_AT)),
        finished_at=ms_to_datetime(_number(fields, Field.FINISHED_AT)),
        error=error or state_error,
        traceback=_text(fields, Field.TRACEBACK),
        result=result,
        progress=_fraction(fields, Field.PROGRESS),
        progress_message=_text(fields, Field.PROGRESS_MESSAGE),
        failure=failure,
        headers=decode_headers(fields.get(Field.HEADERS.key)) or {},
        error_type=error_type_of(fields, failure),
        progress_meta=_meta(fields),
    )


def error_type_of(fields: dict[bytes, bytes], failure: FailureKind | None) -> str | None:
    """The stored class path; for a record written before there was one, the class its kind names."""
    stored = _text(fields, Field.ERROR_TYPE)
    if stored or failure is None or failure in (FailureKind.EXCEPTION, FailureKind.RETRY):
        return stored
    return error_type_of_kind(failure.value)


def _meta(fields: dict[bytes, bytes]) -> Any:
    """Progress meta; junk written by something else reads as none, like a junk fraction."""
    raw = fields.get(Field.PROGRESS_META.key)
    if not raw:
        return None
    try:
        return loads(raw)
    except CorruptPayload:
        return None
