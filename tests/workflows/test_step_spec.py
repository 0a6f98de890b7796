"""The step spec's contract: ``StepSpec`` (its fields), ``encode`` and ``decode`` agree, and a spec
stored by an earlier release still decodes to the same step.

A field added to the class but not to ``encode`` (or not to ``decode``), or a
key ``encode`` writes that the class does not declare, fails here rather than
reading as a default on the other side, in a worker, for workflows in flight.
"""

from __future__ import annotations

import dataclasses

import pytest

from taskforge import TaskForge, chain
from taskforge.serialization import dumps, dumps_call, loads
from taskforge.workflows.spec import StepSpec

# Every field away from its default, so a field decode forgets cannot come back equal by chance.
FULL = StepSpec(
    task="app.add",
    queue="q",
    priority=3,
    max_attempts=5,
    timeout_ms=1500,
    limits="rate=1/1",
    inherit=True,
    call=dumps_call((1, 2), {"k": "v"}),
    input=[0, [1, 2]],
    summary=True,
    headers={"traceparent": "00-ab-cd-01"},
    max_worker_losses=5,
)


def test_encode_writes_exactly_the_declared_fields() -> None:
    written = loads(FULL.encode())
    assert isinstance(written, dict)
    declared = [field.name for field in dataclasses.fields(StepSpec)]
    assert list(written) == declared, (
        f"encode writes, not declared: {sorted(set(written) - set(declared))}; "
        f"declared, not written: {sorted(set(declared) - set(written))}"
    )


def test_decode_reads_back_every_field() -> None:
    decoded = StepSpec.decode(FULL.encode())
    lost = [f.name for f in dataclasses.fields(StepSpec) if getattr(decoded, f.name) != getattr(FULL, f.name)]
    assert not lost, f"decode does not read back: {lost}"
    assert decoded == FULL


def test_a_spec_an_earlier_release_stored_decodes_and_encodes_the_same() -> None:
    """Workflows in flight through an upgrade: the map ``launch.py`` wrote before the spec was typed."""
    call = dumps_call(("x",), {})
    legacy = {
        "task": "app.step",
        "queue": "default",
        "priority": 1,
        "max_attempts": 3,
        "timeout_ms": None,
        "limits": "",
        "inherit": False,
        "call": call,
        "input": 0,
    }
    stored = dumps(legacy)
    spec = StepSpec.decode(stored)
    assert spec == StepSpec("app.step", "default", 1, 3, None, "", False, call, 0)
    assert spec.encode() == stored
    stamped = dumps({**legacy, "summary": True, "headers": {"tenant": "t1"}})
    assert StepSpec.decode(stamped).encode() == stamped


@pytest.mark.parametrize(
    "junk",
    [dumps([1, 2]), dumps({"task": "t"}), dumps({**dataclasses.asdict(FULL), "priority": "high"})],
)
def test_junk_is_a_value_error(junk: bytes) -> None:
    with pytest.raises(ValueError, match="step's spec"):
        StepSpec.decode(junk)


@pytest.mark.parametrize("broker_url", ["memory"], indirect=True)
def test_a_step_keeps_its_tasks_budget_of_worker_losses(app: TaskForge) -> None:
    """A workflow step is a job of its task: ``max_worker_losses`` reaches its record as a job sent alone."""

    @app.task(max_worker_losses=7)
    def sturdy(x: int) -> int:
        return x

    @app.task()
    def plain(x: int) -> int:
        return x

    flow = chain(sturdy.s(1), plain.s()).delay()
    first = flow.info().steps[0]
    assert app.broker.claims.job_fields(first.queue, first.id, ["max_worker_losses"]) == ["7"]
    app.drain()
    second = flow.info().steps[1]
    assert app.broker.claims.job_fields(second.queue, second.id, ["max_worker_losses"]) == [None]  # the default
