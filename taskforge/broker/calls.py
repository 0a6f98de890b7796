"""One typed function per Lua script: named parameters in, a ``ScriptCall`` out.

The only Python that knows a script's ARGV order and reply layout (but for
the job record's own: a new job's array and a claim's rows are declared in
``record.py``). Each function's keyword-only parameters are, in order, the
``ARGV[n] name`` lines of its script's header (ARGV[1] is always the queue's key prefix, KEYS[1]
its pending key); ``tests/broker/test_lua_contract.py`` holds the two
together. A call is built here and run by ``Scripts`` (``scripts.py``): one
call at a time, in a pipeline, or followed by ``WAIT``, whichever the broker
needs, with no second copy of the argument list anywhere.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Generic, NamedTuple, TypeVar

from ..job import FailureKind
from . import replies
from .keys import QueueKeys, WorkflowKeys
from .plain_jobs import is_plain, plain_call
from .record import NewJob, enqueue_array

T = TypeVar("T")


class ScriptCall(Generic[T]):
    """One run of script ``name`` on ``queue``: its ARGV after the prefix, and how to read its reply."""

    __slots__ = ("name", "queue", "args", "decode")

    def __init__(self, name: str, queue: QueueKeys | WorkflowKeys, args: list[Any], decode: Callable[[Any], T]) -> None:
        self.name = name
        self.queue = queue
        self.args = args
        self.decode = decode

    @property
    def keys(self) -> list[str]:
        return [self.queue.route]

    @property
    def argv(self) -> list[Any]:
        return [self.queue.prefix, *self.args]


def _flag(on: bool) -> str:
    return "1" if on else ""


def _claim_flags(promote: bool, limited: bool, retry: bool) -> list[str]:
    """A claim's flags as the ARGV strings dequeue.lua and succeed.lua read ('1' = on)."""
    return [_flag(promote), _flag(limited), _flag(retry)]


def enqueue(
    q: QueueKeys, *, max_size: int, resend: bool, jobs: Sequence[NewJob]
) -> ScriptCall[list[str] | replies.EnqueueRefused]:
    """``resend``: the same jobs again after an error (their ids may be stored already).

    One plain job goes to ``enqueue_plain``, which stores the same record with a
    fraction of the script text Redis runs per call (see lua/enqueue_plain.lua).
    """
    if len(jobs) == 1 and not max_size and not resend and is_plain(jobs[0]):
        return enqueue_plain(q, **plain_call(jobs[0], q))
    args: list[Any] = [max_size, _flag(resend)]
    for job in jobs:
        args += [enqueue_array(job, q), job.payload]
    return ScriptCall("enqueue", q, args, replies.decode_enqueue)


def enqueue_plain(
    q: QueueKeys,
    *,
    job_id: str,
    task: str,
    priority: str,
    due: str | int,
    delay: int,
    payload: bytes,
    fields: Sequence[tuple[str, Any]],
) -> ScriptCall[list[str] | replies.EnqueueRefused]:
    """One plain job, stored as enqueue.lua would (``plain_jobs.plain_call`` builds it)."""
    args: list[Any] = [job_id, task, priority, due, delay, payload]
    for pair in fields:
        args += pair
    return ScriptCall("enqueue_plain", q, args, replies.decode_enqueue)


class ClaimFlags(NamedTuple):
    """What a claim must look at besides the main pending set (see ``claim_ready`` in lua/lib/claim.lua)."""

    promote: bool = True  # move due scheduled jobs first
    limited: bool = True  # the queue has limited tasks: their pending sets too
    retry: bool = False  # a re-send after an error: hand back this token's jobs if its reply was lost

    def kwargs(self) -> dict[str, bool]:
        """The flags as the keyword arguments of ``dequeue`` and ``succeed`` (a literal: ``_asdict`` costs more)."""
        return {"promote": self.promote, "limited": self.limited, "retry": self.retry}


def dequeue(
    q: QueueKeys,
    *,
    token: str,
    lease_ms: int,
    promote_limit: int,
    count: int,
    promote: bool = True,
    limited: bool = True,
    retry: bool = False,
) -> ScriptCall[replies.ClaimReply]:
    args = [token, lease_ms, promote_limit, count, *_claim_flags(promote, limited, retry)]
    return ScriptCall("dequeue", q, args, replies.decode_claims)


def succeed(
    q: QueueKeys,
    *,
    job_id: str,
    token: str,
    result: bytes,
    retention_ms: int,
    retention_count: int = 0,
    next_token: str = "",
    lease_ms: int = 0,
    promote_limit: int = 0,
    promote: bool = True,
    limited: bool = True,
    retry: bool = False,
) -> ScriptCall[replies.SucceedReply]:
    """Record a result; with ``next_token``, also claim the next job (``SucceedReply.next``)."""
    args: list[Any] = [job_id, token, result, retention_ms, retention_count]
    if next_token:
        args += [next_token, lease_ms, promote_limit, *_claim_flags(promote, limited, retry)]
    return ScriptCall("succeed", q, args, replies.decode_succeed)


def settle(
    q: QueueKeys,
    *,
    retention_ms: int,
    retention_count: int = 0,
    next_token: str = "",
    lease_ms: int = 0,
    promote_limit: int = 0,
    count: int = 0,
    promote: bool = True,
    limited: bool = True,
    retry: bool = False,
    results: Sequence[tuple[str, str, bytes]],
) -> ScriptCall[replies.SettleReply]:
    """Record the results of several runs, (job id, token, result) each; with ``next_token``, also
    claim up to ``count`` jobs (``SettleReply.next``)."""
    args: list[Any] = [
        retention_ms,
        retention_count,
        next_token,
        lease_ms,
        promote_limit,
        count,
        *_claim_flags(promote, limited, retry),
    ]
    for triple in results:
        args += triple
    return ScriptCall("settle", q, args, replies.decode_settle)


def fail(
    q: QueueKeys,
    *,
    job_id: str | bytes,
    token: str,
    error: str,
    traceback: str,
    retry_delay_ms: int | None,
    dead_retention_ms: int,
    failure: FailureKind,
    error_type: str,
    retention_count: int = 0,
) -> ScriptCall[replies.FailOutcome]:
    """``retry_delay_ms`` None: dead now, whatever attempts remain."""
    delay = -1 if retry_delay_ms is None else retry_delay_ms
    args: list[Any] = [job_id, token, error, traceback, delay, dead_retention_ms, failure.value, error_type]
    args.append(retention_count)
    return ScriptCall("fail", q, args, replies.decode_fail)


def adopt(
    q: QueueKeys, *, job_id: str, token: str, max_attempts: int, timeout_ms: int | None, max_worker_losses: int
) -> ScriptCall[bool]:
    timeout = "" if timeout_ms is None else timeout_ms
    losses = "" if max_worker_losses == 2 else max_worker_losses  # the record keeps only a budget not the default
    return ScriptCall("adopt", q, [job_id, token, max_attempts, timeout, losses], bool)


def peek(q: QueueKeys, *, promote_limit: int) -> ScriptCall[replies.QueueHead]:
    return ScriptCall("peek", q, [promote_limit], replies.decode_peek)


def pause(q: QueueKeys, *, on: bool) -> ScriptCall[bool]:
    """Pause (``on``) or resume the queue's starts: True when its state changed."""
    return ScriptCall("pause", q, [_flag(on)], bool)


def progress(
    q: QueueKeys, *, job_id: str, token: str, fraction: float, message: str | None, meta: bytes
) -> ScriptCall[bool]:
    return ScriptCall("progress", q, [job_id, token, repr(fraction), message or "", meta], bool)


def store_step(q: QueueKeys, *, job_id: str, token: str, name: str, result: bytes) -> ScriptCall[bool]:
    return ScriptCall("store_step", q, [job_id, token, name, result], bool)


def stream(q: QueueKeys, *, job_id: str, token: str, item: bytes, index: int) -> ScriptCall[str | None]:
    """Append a run's item number ``index`` to its job's stream: the entry id, or None when fenced."""
    return ScriptCall("stream", q, [job_id, token, item, index], replies.decode_entry)


def sleep_job(q: QueueKeys, *, job_id: str, token: str, index: int, due_ms: int, delay_ms: int) -> ScriptCall[int]:
    return ScriptCall("sleep_job", q, [job_id, token, index, due_ms, delay_ms], int)


def fast_forward(q: QueueKeys, *, advance_ms: int) -> ScriptCall[int]:
    return ScriptCall("fast_forward", q, [advance_ms], int)


def extend(q: QueueKeys, *, lease_ms: int, claims: Iterable[tuple[str, str]]) -> ScriptCall[replies.ExtendResult]:
    """Renew the leases of (job id, claim token) pairs."""
    return ScriptCall("extend", q, [lease_ms, *(value for pair in claims for value in pair)], replies.decode_extend)


def abort(q: QueueKeys, *, job_id: str, retention_ms: int) -> ScriptCall[replies.AbortOutcome]:
    return ScriptCall("abort", q, [job_id, retention_ms], lambda raw: replies.AbortOutcome(int(raw)))


def abandon(q: QueueKeys, *, job_id: str, token: str, retention_ms: int) -> ScriptCall[bool]:
    return ScriptCall("abandon", q, [job_id, token, retention_ms], bool)


def reclaim(
    q: QueueKeys, *, limit: int, dead_retention_ms: int, retention_ms: int
) -> ScriptCall[replies.ReclaimResult]:
    return ScriptCall("reclaim", q, [limit, dead_retention_ms, retention_ms], replies.decode_reclaim)


def sweep(q: QueueKeys, *, limit: int, retention_count: int = 0) -> ScriptCall[tuple[int, bool]]:
    return ScriptCall("sweep", q, [limit, retention_count], lambda raw: (int(raw[0]), bool(int(raw[1]))))


def requeue(q: QueueKeys, *, job_id: str, token: str, interrupted: str = "") -> ScriptCall[bool]:
    """Back to the queue, no attempt used: unrun, or (``interrupted``: why) a run cut short."""
    return ScriptCall("requeue", q, [job_id, token, interrupted], bool)


def pass_job(q: QueueKeys, *, job_id: str, token: str, delay_ms: int, cap_ms: int) -> ScriptCall[int]:
    return ScriptCall("pass", q, [job_id, token, delay_ms, cap_ms], int)


def expire_owner(q: QueueKeys, *, owner: str) -> ScriptCall[int]:
    return ScriptCall("expire_owner", q, [owner], int)


def cancel(q: QueueKeys, *, job_id: str, retention_ms: int) -> ScriptCall[replies.CancelOutcome]:
    return ScriptCall("cancel", q, [job_id, retention_ms], lambda raw: replies.CancelOutcome(int(raw)))


def await_state(q: QueueKeys, *, job_id: str) -> ScriptCall[str | None]:
    """Mark the job waited on; its state, or None when there is no such job."""
    return ScriptCall("await", q, [job_id], replies.decode_state)


def retry_dead(q: QueueKeys, *, limit: int, job_ids: Sequence[str]) -> ScriptCall[list[str]]:
    return ScriptCall("retry_dead", q, [limit, *job_ids], replies.decode_ids)


def purge(q: QueueKeys, *, which: str, limit: int) -> ScriptCall[int]:
    return ScriptCall("purge", q, [which, limit], int)


def queue_probe(q: QueueKeys, *, minute: int, minutes: int) -> ScriptCall[tuple[bool, bool, int]]:
    """Whether the queue holds any job, whether it has stats in the last ``minutes``, and its expiries there."""
    return ScriptCall("queue_probe", q, [minute, minutes], replies.decode_probe)


def forget(q: QueueKeys, *, phase: str, cursor: str, pattern: str) -> ScriptCall[tuple[str, str, int]]:
    """``tidy`` (after a purge) or one slice of ``forget``: (what still holds a job, or '';
    the next SCAN cursor, '0' when done; keys deleted)."""
    return ScriptCall("forget", q, [phase, cursor, pattern], replies.decode_forget)


def delete_jobs(q: QueueKeys, *, job_ids: Sequence[str]) -> ScriptCall[int]:
    """Finished jobs deleted for good (``taskforge jobs --delete``): how many went."""
    return ScriptCall("delete_jobs", q, [*job_ids], int)


def cancel_steps(q: QueueKeys, *, workflow: str, retention_ms: int, job_ids: Sequence[str]) -> ScriptCall[int]:
    return ScriptCall("cancel_steps", q, [workflow, retention_ms, *job_ids], int)


def replan_steps(
    q: QueueKeys, *, workflow: str, on_failure: str, phase: str, job_ids: Sequence[str]
) -> ScriptCall[list[str]]:
    """A resumed workflow's steps on this queue made ready to go again, in two phases ('drop' the
    records its death left, then 'revive' its dead steps): the ids moved back to pending."""
    return ScriptCall("replan_steps", q, [workflow, on_failure, phase, *job_ids], replies.decode_ids)


def workflow_create(w: WorkflowKeys, *, steps: int, fields: Sequence[tuple[str, bytes | str]]) -> ScriptCall[bool]:
    """Store a workflow: False when its record exists already (a re-send after a lost reply)."""
    args: list[Any] = [steps]
    for name, value in fields:
        args += [name, value]
    return ScriptCall("workflow_create", w, args, bool)


def workflow_report(
    w: WorkflowKeys, *, step: int, state: str, result: bytes, error: str, retention_ms: int
) -> ScriptCall[replies.WorkflowReply]:
    args: list[Any] = [step, state, result, error, retention_ms]
    return ScriptCall("workflow_report", w, args, replies.decode_workflow_report)


def workflow_cancel(w: WorkflowKeys, *, retention_ms: int) -> ScriptCall[replies.WorkflowReply]:
    return ScriptCall("workflow_cancel", w, [retention_ms], replies.decode_workflow_cancel)


def workflow_settle(w: WorkflowKeys) -> ScriptCall[bool]:
    return ScriptCall("workflow_settle", w, [], bool)


def workflow_flight(w: WorkflowKeys, *, cursor: str, count: int) -> ScriptCall[tuple[replies.WorkflowReply, str]]:
    """One slice of the steps free to go, and the cursor of the next ('0': none)."""
    return ScriptCall("workflow_flight", w, [cursor, count], replies.decode_workflow_flight)


def workflow_resume(w: WorkflowKeys, *, finish: bool) -> ScriptCall[replies.ResumeReply]:
    return ScriptCall("workflow_resume", w, ["1" if finish else "0"], replies.decode_workflow_resume)


# -- depends_on: a job that waits for jobs that exist (``dependencies.py``) ----------------------


def defer(q: QueueKeys, *, job_id: str) -> ScriptCall[int]:
    return ScriptCall("defer", q, [job_id], int)


def depend(q: QueueKeys, *, job_id: str, dependent: str) -> ScriptCall[str]:
    return ScriptCall("depend", q, [job_id, dependent], replies.text)


def dep_report(q: QueueKeys, *, job_id: str, parent: str, state: str, retention_ms: int) -> ScriptCall[str]:
    return ScriptCall("dep_report", q, [job_id, parent, state, retention_ms], replies.text)


# Script name -> its typed call: what the header test walks.
CALLS: dict[str, Callable[..., ScriptCall[Any]]] = {
    "enqueue": enqueue,
    "enqueue_plain": enqueue_plain,
    "dequeue": dequeue,
    "succeed": succeed,
    "settle": settle,
    "fail": fail,
    "adopt": adopt,
    "peek": peek,
    "pause": pause,
    "progress": progress,
    "store_step": store_step,
    "sleep_job": sleep_job,
    "stream": stream,
    "fast_forward": fast_forward,
    "extend": extend,
    "abort": abort,
    "abandon": abandon,
    "reclaim": reclaim,
    "sweep": sweep,
    "requeue": requeue,
    "pass": pass_job,
    "expire_owner": expire_owner,
    "cancel": cancel,
    "await": await_state,
    "retry_dead": retry_dead,
    "purge": purge,
    "delete_jobs": delete_jobs,
    "forget": forget,
    "queue_probe": queue_probe,
    "cancel_steps": cancel_steps,
    "workflow_create": workflow_create,
    "workflow_report": workflow_report,
    "workflow_cancel": workflow_cancel,
    "workflow_settle": workflow_settle,
    "workflow_flight": workflow_flight,
    "replan_steps": replan_steps,
    "workflow_resume": workflow_resume,
    "defer": defer,
    "depend": depend,
    "dep_report": dep_report,
}
