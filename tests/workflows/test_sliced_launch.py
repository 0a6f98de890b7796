"""A big group or chord launches in pieces (broker/workflow_pieces.py, broker/batches.py): whole and once.

Piece and slice sizes are set small through the modules' knobs, so a group
of 20 goes the way a group of 100,000 does; memory:// and real Redis.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from taskforge import TaskForge, WorkflowState, chord, group
from taskforge.broker import batches, workflow_pieces
from taskforge.broker.keys import WORKFLOW_LAUNCHING
from taskforge.errors import BrokerUnavailable
from taskforge.worker import reconcile
from taskforge.worker.reconcile import Reconciler
from tests.conftest import inspector

from . import wfapp
from .conftest import bound
from .wfapp import ident, total

SIZE = 20


@pytest.fixture
def app(broker_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[TaskForge]:
    monkeypatch.setattr(workflow_pieces, "PIECE_UNITS", 6)
    monkeypatch.setattr(batches, "SLICE_JOBS", 4)
    monkeypatch.setattr(batches, "STAGE_GROUP", 1)
    with bound(wfapp.app, broker_url) as app:
        yield app


def staged_calls(app: TaskForge, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Spy on workflow_create's calls: the mode of each (ARGV[2])."""
    run = app.broker.ledger.scripts.run
    modes: list[str] = []

    def spy(call: Any) -> Any:
        if call.name == "workflow_create":
            modes.append(str(call.args[0]).split(":")[0])
        return run(call)

    monkeypatch.setattr(app.broker.ledger.scripts, "run", spy)
    return modes


def workflow_keys(app: TaskForge) -> list[bytes]:
    return sorted(inspector(app).keys("taskforge:{wf:*"))


def pending_steps(app: TaskForge) -> list[str]:
    claims, _ = app.broker.claims.dequeue("wf", 60_000, count=10 * SIZE)
    return [c.id for c in claims]


def test_a_big_group_is_staged_in_pieces_then_committed_once(app: TaskForge, monkeypatch: pytest.MonkeyPatch) -> None:
    modes = staged_calls(app, monkeypatch)
    h = group(ident.s(i) for i in range(SIZE)).delay()
    assert modes[-1] == "commit" and modes.count("stage") > 3 and "" not in modes
    assert not any(b":new:" in k for k in workflow_keys(app))  # nothing staged is left
    ids = pending_steps(app)
    assert sorted(ids) == sorted(f"{h.id}.{i}" for i in range(SIZE))  # each member once
    assert app.broker.client.zcard(WORKFLOW_LAUNCHING) == 0


def test_a_big_chord_runs_to_its_body(app: TaskForge) -> None:
    h = chord((ident.s(i) for i in range(SIZE)), total.s()).delay()
    app.drain()
    assert h.result(timeout=5) == SIZE * (SIZE - 1) // 2
    assert h.status() is WorkflowState.SUCCEEDED


def test_a_big_async_group_launches_in_pieces(app: TaskForge, monkeypatch: pytest.MonkeyPatch) -> None:
    h = asyncio.run(group(ident.s(i) for i in range(SIZE)).adelay())
    app.drain()
    assert h.result(timeout=5) == list(range(SIZE))


def test_a_connection_lost_while_staging_leaves_no_workflow_and_the_pieces_expire(
    app: TaskForge, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(batches, "STAGE_TTL_MS", 400)
    run = app.broker.ledger.scripts.run
    sent: list[int] = []

    def dropping(call: Any) -> Any:
        if call.name == "workflow_create":
            sent.append(1)
            if len(sent) > 2:
                raise redis.ConnectionError("connection lost")
        return run(call)

    monkeypatch.setattr(app.broker.ledger.scripts, "run", dropping)
    with pytest.raises(BrokerUnavailable):
        group(ident.s(i) for i in range(SIZE)).delay()
    assert pending_steps(app) == []
    assert not any(k.endswith(b":record") for k in workflow_keys(app))  # no workflow to see
    monkeypatch.setattr(reconcile, "LAUNCH_GRACE_MS", -1000)
    Reconciler(app.broker, ["wf"]).run()  # unlists the launch that never stored its record
    assert app.broker.client.zcard(WORKFLOW_LAUNCHING) == 0
    deadline = time.monotonic() + 10
    while workflow_keys(app) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert workflow_keys(app) == []  # the staged pieces went by themselves


def test_a_launch_cut_short_while_sending_its_members_sends_each_once(
    app: TaskForge, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_each = app.broker.jobs.scripts.run_each
    sent: list[int] = []

    def dropping(calls: Any) -> Any:
        sent.append(1)
        if len(sent) > 2:  # the members' enqueue loses Redis after two staged slices
            raise redis.ConnectionError("connection lost")
        return run_each(calls)

    monkeypatch.setattr(app.broker.jobs.scripts, "run_each", dropping)
    with pytest.raises(BrokerUnavailable):
        group(ident.s(i) for i in range(SIZE)).delay()
    monkeypatch.setattr(app.broker.jobs.scripts, "run_each", run_each)
    [workflow] = [m.decode() for m in app.broker.client.zrange(WORKFLOW_LAUNCHING, 0, -1)]
    monkeypatch.setattr(reconcile, "LAUNCH_GRACE_MS", -1000)
    Reconciler(app.broker, ["wf"]).run()
    Reconciler(app.broker, ["wf"]).run()  # a second pass sends nothing more
    ids = pending_steps(app)
    assert sorted(ids) == sorted(f"{workflow}.{i}" for i in range(SIZE))


def test_a_big_group_cancelled_stops_every_step_a_slice_per_call(
    app: TaskForge, monkeypatch: pytest.MonkeyPatch
) -> None:
    from taskforge.broker import workflow_plans

    monkeypatch.setattr(workflow_plans, "STEP_SLICE", 3)
    run = app.broker.ledger.scripts.run
    sizes: list[int] = []

    def spy(call: Any) -> Any:
        if call.name == "cancel_steps":
            sizes.append(len(call.args) - 2)
        return run(call)

    monkeypatch.setattr(app.broker.ledger.scripts, "run", spy)
    h = group(ident.s(i) for i in range(SIZE)).delay()
    h.cancel()
    assert h.status() is WorkflowState.CANCELLED
    assert max(sizes) <= 3 and sum(sizes) == SIZE
    assert pending_steps(app) == []
