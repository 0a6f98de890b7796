"""A dead workflow resumed: ``WorkflowHandle.retry()``, ``taskforge workflow --retry``, a dead step retried.

The workflow's record becomes running in one script of its own slot
(``workflow_resume``): its dead steps are open again and every step waits
again for the open steps before it. The steps' records live in their queues'
slots, so they follow: the records its death left for the steps it
cancelled are dropped (``replan_steps`` 'drop'), the steps free to go are
sent under their fixed ids, and last the dead steps go back in line
('revive'), so a step that dies again at once stops steps already stored. A mark in the index comes first
and goes last: a process that dies half way leaves it, and the reconciler
does the same idempotent work again (``resume(..., finish=True)``). A
resume waits until the death is settled (its steps in flight stopped by
whoever recorded it): a stop still on its way would cancel the steps sent
again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..broker import workflow_plans
from ..broker.keys import WORKFLOW_RESUMING
from ..broker.plan import Plan, Settings, Sleep
from .delivery import acting, sending, step_id, step_index
from .record import WorkflowField

if TYPE_CHECKING:
    from ..broker.aio_roles import AsyncBrokerRoles
    from ..broker.replies import ResumeReply
    from ..broker.roles import BrokerRoles

log = logging.getLogger("taskforge.workflows")

SETTLE_WAIT_S = 10.0  # a deliverer takes milliseconds between recording a death and settling it
SETTLE_POLL_S = 0.02
SETTLED_STATE = [WorkflowField.SETTLED.value, WorkflowField.STATE.value]


def resume(broker: BrokerRoles, workflow: str, finish: bool = False) -> ResumeReply:
    """Resume ``workflow`` if it is dead; ``before`` of the reply is the state it was in ('gone': none).

    ``finish``: the reconciler finishing a resume cut short, which also
    takes up a workflow found running.
    """
    return broker.drive(resuming(broker.settings, workflow, finish))


async def aresume(broker: AsyncBrokerRoles, workflow: str) -> ResumeReply:
    """``resume()``, awaited: the same writes in the same order."""
    return await broker.drive(resuming(broker.settings, workflow))


def resuming(settings: Settings, workflow: str, finish: bool = False) -> Plan[ResumeReply]:
    """``resume``'s writes, in order: the mark, the record, the index, the steps' records, the steps, the mark."""
    yield from workflow_plans.mark_resuming(workflow)
    reply = yield from workflow_plans.resume_workflow(workflow, finish, settings.url)
    if reply.before == "ending":
        yield from settling_first(settings, workflow)
        reply = yield from workflow_plans.resume_workflow(workflow, finish, settings.url)
    if reply.before == "dead" or (finish and reply.before == "running"):
        yield from workflow_plans.list_running(workflow)
        yield from replanning(workflow, reply, "drop")
        yield from sending(settings, workflow, reply.ready)
        yield from replanning(workflow, reply, "revive")
        if reply.before == "dead":
            log.info("workflow %s resumed: %d steps free to go", workflow, len(reply.ready))
    yield from workflow_plans.unmark(WORKFLOW_RESUMING, workflow)
    return reply


def settling_first(settings: Settings, workflow: str) -> Plan[None]:
    """Wait until the death of ``workflow`` is settled: its steps in flight stopped, its on_failure sent.

    Its deliverer does that just after recording the death; a resume before
    it would have that late stop cancel the steps it sends again. A
    deliverer that does not finish within ``SETTLE_WAIT_S`` died: its
    steps are stopped and the workflow settled here instead.
    """
    deadline = time.monotonic() + SETTLE_WAIT_S
    while time.monotonic() < deadline:
        settled, state = yield from workflow_plans.workflow_fields(workflow, SETTLED_STATE)
        if settled or state != b"dead":
            return
        yield Sleep(SETTLE_POLL_S)
    reply = yield from workflow_plans.cancel_workflow(workflow, settings.retention_ms)  # a dead one: its ending only
    yield from acting(settings, workflow, reply._replace(ready=[]), "dead")


def replanning(workflow: str, reply: ResumeReply, phase: str) -> Plan[None]:
    """Make the records of the steps free to go ready for them, queue by queue.

    'drop' (the records the death left, so that the send stores those steps
    again) runs everywhere before the send, and 'revive' (the dead steps back
    in line) after it: a revived step that dies again at once must find every
    step its death stops already stored, or a step sent after that stop
    would wait, orphaned, in a dead workflow.
    """
    for queue, on_failure, ids in replan_calls(workflow, reply):
        yield from workflow_plans.replan_steps(queue, workflow, on_failure, phase, ids)


def replan_calls(workflow: str, reply: ResumeReply) -> list[tuple[str, str, list[str]]]:
    """(queue, its on_failure step id or '', the step ids on it) for each queue ``replan_steps`` runs on."""
    by_queue: dict[str, list[str]] = {}
    for index, queue in reply.replan:
        if queue:
            by_queue.setdefault(queue, []).append(step_id(workflow, index))
    on_failure_queue = ""
    if reply.on_failure is not None and reply.on_failure[1]:
        on_failure_queue = reply.on_failure[1]
        by_queue.setdefault(on_failure_queue, [])
    return [
        (queue, step_id(workflow, reply.on_failure[0]) if reply.on_failure and queue == on_failure_queue else "", ids)
        for queue, ids in by_queue.items()
    ]


def retry_dead(broker: BrokerRoles, queue: str, job_ids: Sequence[str]) -> list[str]:
    """Dead jobs back in line, as ``Cleanup.retry_dead``; a step of a dead workflow resumes that workflow first.

    What ``taskforge dead retry`` and the dashboard's Retry call.
    The resume moves the step (and its workflow's other dead steps) back in
    line itself, after the workflow's record says running, so the step's
    next report always reaches a running workflow. What is left (plain
    jobs, on_failure steps, steps of workflows not dead) is moved as ever.
    Returns the ids of ``job_ids`` now back in line.
    """
    ids = list(dict.fromkeys(job_ids))
    steps = [job_id for job_id in ids if step_index(job_id) is not None]
    workflows: dict[str, list[str]] = {}
    for job_id, record in zip(steps, broker.ledger.step_records([(queue, s) for s in steps]), strict=True):
        workflow = (record.get(b"workflow") or b"").decode()
        if workflow and record.get(b"state") == b"dead":
            workflows.setdefault(workflow, []).append(job_id)
    resumed: set[str] = set()
    for workflow, members in workflows.items():
        [on_failure] = broker.ledger.workflow_fields(workflow, [WorkflowField.ON_FAILURE.value])
        own = [m for m in members if on_failure is None or step_index(m) != int(on_failure)]
        if own and resume(broker, workflow).before == "dead":
            resumed.update(own)
    rest = [job_id for job_id in ids if job_id not in resumed]
    moved = resumed | set(broker.cleanup.retry_dead(queue, rest) if rest else ())
    return [job_id for job_id in ids if job_id in moved]
