"""A group of 10,000 members and its follow-up, run by a real worker on real Redis."""

from __future__ import annotations

import pytest

from taskforge import JobState, TaskForge, WorkflowState, chain, group

from .conftest import RESULT_TIMEOUT, wait_for
from .wfapp import ident, total

pytestmark = [pytest.mark.redis, pytest.mark.slow]
SIZE = 10_000


@pytest.fixture(scope="module")
def served() -> tuple[str, ...]:
    return ("wf",)


def test_a_group_of_ten_thousand_members_and_its_follow_up(live_app: TaskForge) -> None:
    h = chain(group(ident.s(i) for i in range(SIZE)), total.s()).delay()
    assert h.result(timeout=90) == SIZE * (SIZE - 1) // 2
    assert h.status() is WorkflowState.SUCCEEDED
    steps = h.info().steps
    assert len(steps) == SIZE + 1
    assert [s.args for s in steps[:SIZE]] == [(i,) for i in range(SIZE)]  # member order, flattened
    assert (steps[-1].task, steps[-1].state) == (total.name, JobState.SUCCEEDED)
    assert steps[-1].args == (list(range(SIZE)),)  # the follow-up got every result, in member order
    wait_for(lambda: not live_app.broker.ledger.outbox("wf"), RESULT_TIMEOUT, "every report delivered")
