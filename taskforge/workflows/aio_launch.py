"""``chain(...).adelay()`` and ``group(...).adelay()``: ``launch.py``'s ``Launch``, its writes driven on the loop.

The checks, the record and the writes are ``launch.py``'s own: every step is
serialized and checked before anything is stored, and the writes come in the
same order (``Launch.storing``): the launching mark and the record, then the
first steps, then the mark dropped; a producer cancelled or killed in
between leaves the mark for the reconciler.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..handle import async_access
from ..sending import around
from .empty import EmptyWorkflow
from .handle import WorkflowHandle
from .launch import Launch
from .plan import Plan, make_plan

if TYPE_CHECKING:
    from .canvas import Node, Signature


async def alaunch(root: Node, on_failure: Signature[Any] | None) -> WorkflowHandle[Any]:
    """``launch()``, awaited."""
    plan = make_plan(root)
    return await _alaunch(plan, on_failure) if plan.steps else EmptyWorkflow(plan)


async def _alaunch(plan: Plan, on_failure: Signature[Any] | None) -> WorkflowHandle[Any]:
    launching = Launch(plan, on_failure, lambda app: async_access(app).async_broker())
    broker = async_access(launching.app).async_broker()
    with around(launching.app.send_hooks, launching.outgoing()) as headers:
        await broker.drive(launching.storing(broker.settings, headers))
    return launching.started()
