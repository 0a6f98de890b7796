"""What the workflow ledger's pipelines carry, planned once for the sync and the async ledger.

Queueing a command on a redis-py pipeline does no I/O on either kind of
client (only ``execute`` does, awaited on the async one), so the commands
of each operation are written here once, against any pipeline, with the
clock passed in; ``workflows.py`` and ``aio_workflows.py`` only build the
pipeline and execute it. The two ledgers then cannot drift apart in what
they write, or in which order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .keys import WORKFLOW_LAUNCHING, WORKFLOW_STATES, QueueKeys, workflow_index


def mark_launching(pipe: Any, workflow: str, now_ms: int) -> None:
    """A new workflow is launching (and running): the marks go before its record is stored."""
    pipe.zadd(WORKFLOW_LAUNCHING, {workflow: now_ms})
    pipe.zadd(workflow_index("running"), {workflow: now_ms})


def list_ended(pipe: Any, ended: Sequence[tuple[str, str]], now_ms: int, retention_ms: int) -> None:
    """Ended workflows leave the running and launching indexes and are listed under their final
    states; each index touched drops what is older than the retention."""
    for workflow, state in ended:
        pipe.zrem(workflow_index("running"), workflow)
        pipe.zrem(WORKFLOW_LAUNCHING, workflow)
        if state in WORKFLOW_STATES:
            pipe.zadd(workflow_index(state), {workflow: now_ms}, nx=True)
    for state in sorted({state for _, state in ended if state in WORKFLOW_STATES and state != "running"}):
        pipe.zremrangebyscore(workflow_index(state), "-inf", now_ms - retention_ms)


def read_steps(pipe: Any, steps: Sequence[tuple[str, str]]) -> None:
    """Queue the reads of (queue, job id) steps' records."""
    for queue, job_id in steps:
        pipe.hgetall(QueueKeys(queue).job(job_id))


def step_records(replies: Sequence[Any]) -> list[dict[bytes, bytes]]:
    """The replies of ``read_steps``: each step's record, {} for one not stored (or not a hash)."""
    return [reply if isinstance(reply, dict) else {} for reply in replies]
