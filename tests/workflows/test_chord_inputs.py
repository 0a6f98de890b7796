"""A chord's body with thousands of inputs gets them read in slices, not in one long script call.

The script that frees a step answers its inputs' results inline up to 2,000
(``INLINE_INPUTS`` in ``lua/lib/workflows.lua``); past that it answers their count, and the
sender reads them from the workflow's record a slice per call
(``delivery.with_inputs``, ``aio_delivery.awith_inputs``): a chord of 100,000
members was one call of over 100 ms, every other client waiting.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from taskforge import TaskForge, WorkflowState, chord
from taskforge.broker import workflow_plans
from taskforge.broker.replies import StepToSend
from taskforge.workflows import delivery
from taskforge.workflows.aio_delivery import awith_inputs
from taskforge.workflows.record import StepField

from . import wfapp
from .conftest import bound
from .wfapp import ident, total

MEMBERS = 2_050  # past the 2,000 a script answers inline


@pytest.fixture
def app(broker_url: str) -> Iterator[TaskForge]:
    with bound(wfapp.app, broker_url) as app:
        yield app


def test_a_body_past_the_inline_limit_reads_its_inputs_a_slice_per_call(
    app: TaskForge, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(delivery, "INPUT_SLICE", 500)
    read = workflow_plans.workflow_fields  # the plan every read of a workflow's fields runs
    sizes: list[int] = []

    def spy(workflow: str, names: Any) -> Any:
        sizes.append(len(names))
        return read(workflow, names)

    monkeypatch.setattr(workflow_plans, "workflow_fields", spy)
    h = chord((ident.s(i) for i in range(MEMBERS)), total.s()).delay()
    app.drain(max_jobs=MEMBERS + 1)
    assert h.result(timeout=5) == MEMBERS * (MEMBERS - 1) // 2
    assert h.status() is WorkflowState.SUCCEEDED
    assert sorted(n for n in sizes if n > 1) == [50, 500, 500, 500, 500]  # the input list, then the slices


def test_the_async_sender_reads_the_same_inputs(app: TaskForge) -> None:
    h = chord((ident.s(i) for i in range(MEMBERS)), total.s()).delay()
    app.drain(max_jobs=MEMBERS + 1)
    assert h.result(timeout=5) == MEMBERS * (MEMBERS - 1) // 2
    body = MEMBERS  # the members come first
    [listed, spec] = app.broker.ledger.workflow_fields(h.id, [StepField.INPUT.at(body), StepField.SPEC.at(body)])
    assert listed is not None and spec is not None and len(listed.split(b",")) == MEMBERS
    held = StepToSend(body, spec, [], held=MEMBERS)
    synced = delivery.with_inputs(app.broker, h.id, held)

    async def read() -> StepToSend:
        return await awith_inputs(app.async_broker(), h.id, held)

    awaited = asyncio.run(read())
    assert synced == awaited and synced.held == 0 and len(synced.inputs) == MEMBERS
    assert delivery.step_job(h.id, synced)[1].payload == delivery.step_job(h.id, awaited)[1].payload
