"""``chain(...).adelay()`` and ``group(...).adelay()``: ``launch.py``'s steps, awaited.

The checks and the record are ``launch.py``'s own (``make_plan``,
``record_fields``): every step is serialized and checked before anything is
stored. The writes come in the same order: the launching mark and the
record, then the first steps, then the mark dropped; a producer cancelled
or killed in between leaves the mark for the reconciler.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from ..errors import ConfigurationError
from ..handle import JobHandle, async_access
from ..sending import announce, around
from .aio_delivery import asend
from .handle import WorkflowHandle
from .launch import first_steps, outgoing, record_fields, with_headers
from .plan import make_plan

if TYPE_CHECKING:
    from .canvas import Node, Signature


async def alaunch(root: Node, on_failure: Signature[Any] | None) -> WorkflowHandle[Any]:
    plan = make_plan(root)
    app = plan.steps[0].signature.task.app  # the first step, depth-first
    fields = record_fields(plan, on_failure)
    brokers = {id(async_access(step.signature.task.app).async_broker()) for step in plan.steps}
    if len(brokers) > 1:
        raise ConfigurationError("a workflow's steps must all belong to apps on the same Redis")
    workflow = uuid.uuid4().hex
    broker = async_access(app).async_broker()
    roots = [i for i, step in enumerate(plan.steps) if not step.after]
    first = plan.steps[roots[0]].signature.task
    with around(app.send_hooks, outgoing(workflow, first, plan)) as headers:
        stored = with_headers(fields, headers)
        await broker.ledger.create_workflow(workflow, len(plan.steps), stored)
        await asend(broker, workflow, first_steps(stored, roots))
        await broker.ledger.workflow_launched(workflow)
    announce(app.after_enqueue, JobHandle(app, f"{workflow}.{roots[0]}", first.queue))
    return WorkflowHandle(app, workflow)
