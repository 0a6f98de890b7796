"""The job record, declared once: its fields, what enqueue sends, what a claim returns, what JobInfo shows.

Everything that knows the layout of a job's record reads it from here:

- ``Field``: the names of the record's hash fields. ``tests/broker/test_record.py``
  checks that the Lua scripts use exactly these names.
- ``ENQUEUE``: the JSON array one new job travels in to ``lua/enqueue.lua``,
  slot by slot. A slot with a ``stored`` field is kept in the record as it
  is; the script reads the others (when the job is due, its lock, its tick)
  as ``f[NEW_<NAME>]``.
- ``ClaimRow``: what a claim returns per job (``claim_ready`` in
  ``lua/lib/claim.lua``): three values the script works out, then the fields
  ``CLAIMED`` as they are. ``claim_of`` turns a row into a worker's ``Claim``.
- ``SHOWN``: the ``JobInfo`` attributes read from one field each
  (``job_info`` works out the rest); ``taskforge job --json`` prints
  ``JobInfo.to_dict()``.

The Lua gets positions from here rather than spelling them: ``lua_definitions``
writes ``NEW_<NAME>`` (a slot's position), ``NEW_STORED`` and ``CLAIMED``,
and ``scripts.py`` puts them in front of the scripts that use them, so a
slot or a claimed field added here reaches the scripts with no Lua edited.
Adding a field to the record: a ``Field``, a ``NewJob`` attribute and its
``Slot``, a ``ClaimRow``/``Claim`` attribute if workers need it, a ``SHOWN``
entry, then ``JobInfo`` (``taskforge/job.py``), the producer that sets it
(``taskforge/building.py``) and ``taskforge job``'s help (``cli/job.py``).
"""

from __future__ import annotations

import enum
import json
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

from ..errors import CorruptPayload
from ..job import FailureKind, JobInfo, JobState, Priority
from ..serialization import loads, loads_call
from .keys import QueueKeys
from .record_values import (
    Raw,
    blank,
    count,
    error_type,
    failure,
    fraction,
    meta,
    moment,
    number,
    priority,
    state,
    text,
    timeout,
)

# Producers and workflows read and write headers through the record's module.
from .record_values import decode_headers as decode_headers
from .record_values import encode_headers as encode_headers


class Field(str, enum.Enum):
    """One field of a job's hash; the value is the name Redis stores."""

    ID = "id"  # written by earlier versions only: the key names the job
    TASK = "task"
    PAYLOAD = "payload"  # msgpack (args, kwargs)
    PRIORITY = "priority"  # 0 low .. 3 critical; absent: 1 (normal)
    MAX_ATTEMPTS = "max_attempts"  # absent: DEFAULT_MAX_ATTEMPTS
    TIMEOUT = "timeout"  # ms, '' = none
    # runs started so far that count against max_attempts (a lost or interrupted one does not); absent: 0
    ATTEMPTS = "attempts"
    MAX_WORKER_LOSSES = "max_worker_losses"  # runs that may lose their worker before it ends dead; absent: 2
    LOSSES = "losses"  # runs whose worker was lost (killed, crashed) under them; absent: none
    INTERRUPTED = "interrupted"  # runs a worker's shutdown cut short (its grace ran out); absent: none
    CREATED_AT = "created_at"  # ms since the epoch, Redis's clock, like every time below
    SCHEDULED_AT = "scheduled_at"
    STARTED_AT = "started_at"
    FINISHED_AT = "finished_at"
    STATE = "state"  # a JobState value
    SEQ = "seq"  # enqueue sequence: its place in line within its priority
    TOKEN = "token"  # the claim token while running, '' or absent otherwise (the fencing rule)
    UNSTARTED = "unstarted"  # '1': claimed after the first job of a batch, not said started (read while running)
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
    KEY = "key"  # the job's key (the task's key= option, or with_options(key=)); absent: none
    LANE = "lane"  # the lane a keyed job waits in: its key, with its task's name when the task has limits
    STREAM_LENGTH = "stream_length"  # items in the job's stream (stream.lua); absent: none
    STREAM_LAST = "stream_last"  # "<token>:<n>": the run and number of the item written last (a repeat writes none)
    PARENTS = "parents"  # depends_on: "<queue>\t<id>" lines, the jobs it waits for (stored at enqueue)
    ALLOW_FAILURE = "allow_failure"  # '1': it runs even when one of them ends dead or cancelled
    DEPENDENTS = "dependents"  # '1': jobs wait for this one (depend.lua): its end goes to the depbox
    DEBOUNCE_FIRST = (
        "debounce_first"  # ms: the first call of a debounced job's burst (its debounce_max_wait counts from it)
    )

    @property
    def key(self) -> bytes:
        """The field as redis-py returns it in a hash."""
        return self.value.encode()


RECORD_FIELDS = frozenset(field.value for field in Field)

# What an absent field means, for the fields a new record leaves out when they
# hold it: the defaults live here and in the Lua that reads them, not in every
# record (a record written by an earlier version holds them all, and reads the same).
DEFAULT_PRIORITY = Priority.NORMAL  # lua/lib/keys.lua's pending_score reads absent as it
DEFAULT_MAX_ATTEMPTS = 3  # TaskOptions.max_attempts's default; lua/fail.lua reads absent as it


def _unless(value: int, default: int) -> int | str:
    """A slot's value, or '' (not stored) when it is what an absent field means."""
    return "" if value == default else value


@dataclass(frozen=True)
class NewJob:
    """A job as the producer hands it to ``enqueue``: already serialized.

    Keys are built by the broker alone: a unique job carries the digest of
    its unique key, a periodic tick the time of its tick.
    """

    id: str
    task: str
    payload: bytes  # travels beside the array (Lua cannot read msgpack, and JSON cannot carry bytes)
    priority: int
    max_attempts: int
    timeout_ms: int | None = None
    due_ms: int | None = None  # absolute, producer's clock (apply_at)
    delay_ms: int = 0  # relative, resolved on Redis's clock (apply_in, retries)
    inherit: bool = False  # sent by name: the worker's task definition supplies max_attempts, timeout
    limits: str = ""  # "rate:period_ms:concurrency" (then "|name=..." per shared limit) for a limited task
    unique_digest: str = ""  # a unique job: the digest of its task and unique key ('' = not unique)
    lock_ttl_ms: int = 0  # TTL of the unique lock or periodic tick key
    tick_ms: int | None = None  # a periodic tick (ms since the epoch): enqueued once across all workers
    workflow: str = ""  # the workflow this job is a step of; its id is then fixed by the workflow
    expires_at_ms: int | None = None  # absolute, producer's clock (an aware datetime)
    expires_in_ms: int = 0  # relative to the enqueue, on Redis's clock
    fields: dict[str, str] | None = None  # rarely used plain fields stored as they are (retry filters, keep_ms)
    key: str = ""  # the job's key ('' = none)
    debounce: str = ""  # "delay_ms:max_wait_ms" of a debounced task (max 0: no cap); '' = not debounced
    key_limits: str = ""  # "rate:period_ms:concurrency" per key of a task with key_concurrency or key_rate_limit


class Slot(NamedTuple):
    """One place of the enqueue array: its name, its value for a job, the field it is stored as."""

    name: str  # enqueue.lua reads it as f[NEW_<NAME>]
    value: Callable[[NewJob, QueueKeys], Any]
    stored: Field | None = None  # kept in the record as it is, under this field ('' = not stored)


# The enqueue array of one job, in order (lua/enqueue.lua says what the script does with each).
ENQUEUE: tuple[Slot, ...] = (
    Slot("id", lambda job, q: job.id),
    Slot("task", lambda job, q: job.task, Field.TASK),
    Slot("priority", lambda job, q: _unless(job.priority, DEFAULT_PRIORITY), Field.PRIORITY),
    Slot("max_attempts", lambda job, q: _unless(job.max_attempts, DEFAULT_MAX_ATTEMPTS), Field.MAX_ATTEMPTS),
    Slot("timeout", lambda job, q: blank(job.timeout_ms), Field.TIMEOUT),
    Slot("inherit", lambda job, q: "1" if job.inherit else "", Field.INHERIT),
    Slot("workflow", lambda job, q: job.workflow, Field.WORKFLOW),
    Slot("due", lambda job, q: blank(job.due_ms)),
    Slot("delay", lambda job, q: job.delay_ms),
    Slot("limits", lambda job, q: job.limits),
    Slot("unique", lambda job, q: q.unique(job.unique_digest) if job.unique_digest else ""),
    Slot("lock_ttl", lambda job, q: job.lock_ttl_ms),
    Slot("tick", lambda job, q: "" if job.tick_ms is None else q.tick(job.task, job.tick_ms)),
    Slot("fields", lambda job, q: job.fields or ""),
    Slot("expires_at", lambda job, q: blank(job.expires_at_ms)),
    Slot("expires_in", lambda job, q: job.expires_in_ms),
    Slot("key", lambda job, q: job.key, Field.KEY),
    Slot("debounce", lambda job, q: job.debounce),
    Slot("key_limits", lambda job, q: job.key_limits),
)


# Per job, on the producer's hot path: the slots' functions in a plain tuple, and one
# encoder made once (json.dumps with separators builds a new one per call).
_VALUES = tuple(slot.value for slot in ENQUEUE)
_ENCODE = json.JSONEncoder(separators=(",", ":")).encode


def enqueue_array(job: NewJob, q: QueueKeys) -> str:
    """The JSON array of ``job`` that enqueue.lua reads, slot by slot as ``ENQUEUE`` declares."""
    return _ENCODE([value(job, q) for value in _VALUES])


class ClaimRow(NamedTuple):
    """One claimed job as claim_ready (lua/lib/claim.lua) returns it: what the script works out, then ``CLAIMED``."""

    id: bytes
    attempts: bytes | int  # the attempt this claim starts; a junk field as it is (then ``damage`` says so)
    damage: bytes  # '' or '<field> <value>': that field holds junk; the client dead-letters the job
    task: bytes
    payload: bytes
    max_attempts: bytes
    timeout: bytes
    priority: bytes
    inherit: bytes
    workflow: bytes  # '' or the id of the workflow the job is a step of
    headers: bytes  # '' or a JSON object of strings (producer hooks' headers)
    scheduled_at: bytes  # '' or when the job was last due (ms): with its id, when it became ready (``timings.py``)
    created_at: bytes  # when it was enqueued (ms, Redis's clock): ``current_job().enqueued_at``


ROW_HEAD = 3  # id, attempts, damage: what the claim script works out
# The fields a claim reads and hands to the worker as they are, in row order.
CLAIMED = tuple(Field(name) for name in ClaimRow._fields[ROW_HEAD:])


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
    scheduled_at: int | None = None  # ms: when it was last scheduled or retried for (its wait counts from then)
    created_at: int | None = None  # ms: when it was enqueued (``current_job().enqueued_at``)


def claim_of(row: ClaimRow, job_id: str, queue: str, token: str, call: tuple[tuple[Any, ...], dict[str, Any]]) -> Claim:
    """The claim of a row the broker vetted: ``call`` is its payload decoded."""
    return Claim(
        id=job_id,
        queue=queue,
        token=token,
        task=row.task.decode(errors="replace"),
        args=call[0],
        kwargs=call[1],
        attempts=count(row.attempts),
        max_attempts=attempts_allowed(row.max_attempts),
        timeout=timeout(row.timeout),
        priority=number(row.priority, DEFAULT_PRIORITY) or 0,
        inherit=bool(row.inherit),
        workflow=text(row.workflow) or "",
        headers=decode_headers(row.headers),
        scheduled_at=number(row.scheduled_at),
        created_at=number(row.created_at),
    )


def attempts_allowed(raw: Raw) -> int:
    """max_attempts: absent (a record left the default out) is DEFAULT_MAX_ATTEMPTS; junk is 1, as fail.lua reads it."""
    return DEFAULT_MAX_ATTEMPTS if raw in (None, b"") else number(raw, 1) or 0


def new_token() -> str:
    return secrets.token_hex(8)


# JobInfo's attributes read from one field each, and how. job_info works out the others
# (DERIVED) from several fields or none; the two together are all of JobInfo's attributes.
SHOWN: dict[str, tuple[Field, Callable[[Raw], Any]]] = {
    "task": (Field.TASK, lambda raw: text(raw) or ""),
    "priority": (Field.PRIORITY, priority),
    "attempts": (Field.ATTEMPTS, count),
    "max_attempts": (Field.MAX_ATTEMPTS, attempts_allowed),
    "created_at": (Field.CREATED_AT, moment),
    "scheduled_at": (Field.SCHEDULED_AT, moment),
    "started_at": (Field.STARTED_AT, moment),
    "finished_at": (Field.FINISHED_AT, moment),
    "traceback": (Field.TRACEBACK, text),
    "progress": (Field.PROGRESS, fraction),
    "progress_message": (Field.PROGRESS_MESSAGE, text),
    "failure": (Field.FAILURE, failure),
    "headers": (Field.HEADERS, lambda raw: decode_headers(raw) or {}),
    "progress_meta": (Field.PROGRESS_META, meta),
    "key": (Field.KEY, text),
    "stream_length": (Field.STREAM_LENGTH, count),
    "losses": (Field.LOSSES, count),
    "interrupted": (Field.INTERRUPTED, count),
}
DERIVED = ("id", "queue", "args", "kwargs", "result", "state", "error", "error_type", "held", "steps")
STEP_FIELD = b"step:"  # a finished durable step's result: "step:<name>" (steps.py)


def job_info(job_id: str, queue: str, fields: dict[bytes, bytes], held: str | None = None) -> JobInfo:
    """Decode a raw job hash; a corrupt payload shows as an error, never raises.

    ``held``: why the job, pending, does not start (``Flow.held_reason``), read apart from its record.
    """
    error = text(fields.get(Field.ERROR.key))
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
    steps: dict[str, Any] = {}
    for key, value in fields.items():
        if key.startswith(STEP_FIELD):
            name = key[len(STEP_FIELD) :].decode(errors="replace")
            try:
                steps[name] = loads(value)
            except CorruptPayload as exc:
                error = error or f"CorruptPayload: step {name!r}: {exc}"
    job_state, state_error = state(fields.get(Field.STATE.key))
    shown = {name: decode(fields.get(field.key)) for name, (field, decode) in SHOWN.items()}
    return JobInfo(
        id=job_id,
        queue=queue,
        args=args,
        kwargs=kwargs,
        result=result,
        state=job_state,
        error=error or state_error,
        error_type=error_type(text(fields.get(Field.ERROR_TYPE.key)), shown["failure"]),
        held=held if job_state is JobState.PENDING else None,
        steps=steps,
        **shown,
    )


def error_type_of(fields: dict[bytes, bytes], kind: FailureKind | None) -> str | None:
    """The stored class path; for a record written before there was one, the class its kind names."""
    return error_type(text(fields.get(Field.ERROR_TYPE.key)), kind)


def lua_definitions() -> list[tuple[str, str]]:
    """The layout above as Lua definitions (name, text): ``scripts.py`` puts those a script uses in front of it."""
    origin = "-- Declared in taskforge/broker/record.py"
    defs = [(f"NEW_{slot.name.upper()}", f"local NEW_{slot.name.upper()} = {i}") for i, slot in enumerate(ENQUEUE, 1)]
    defs[0] = (defs[0][0], f"{origin} (ENQUEUE): positions in a new job's array.\n{defs[0][1]}")
    stored = ", ".join(f"{i}, '{slot.stored.value}'" for i, slot in enumerate(ENQUEUE, 1) if slot.stored)
    defs.append(("NEW_STORED", f"{origin} (ENQUEUE): position, field.\nlocal NEW_STORED = {{{stored}}}"))
    claimed = ", ".join(f"'{field.value}'" for field in CLAIMED)
    defs.append(("CLAIMED", f"{origin} (ClaimRow).\nlocal CLAIMED = {{{claimed}}}"))
    default = f"{origin}: what an absent max_attempts is.\nlocal DEFAULT_MAX_ATTEMPTS = {DEFAULT_MAX_ATTEMPTS}"
    defs.append(("DEFAULT_MAX_ATTEMPTS", default))
    return defs
