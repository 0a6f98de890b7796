"""``delay()`` of a workflow that cannot run stores nothing at all: no record, no index entry, no step.

Every step is serialized and checked against its task before the first
write, wherever the bad step sits (a later chain step, a group member, the
``on_failure`` step). Run on ``memory://`` and on a real Redis, with no
worker: the whole keyspace must be as it was.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from taskforge import SerializationError, TaskForge, chain, group
from taskforge.workflows.canvas import Chain, Group

from . import wfapp
from .conftest import bound, text
from .wfapp import add, const, ident, mark, mul, total

UNSERIALIZABLE: dict[str, Callable[[], Chain | Group]] = {
    "a later chain step": lambda: chain(add.s(1, 2), mul.s(object())),
    "a group member": lambda: group(ident.s(1), ident.s(object())),
    "a member of a nested group": lambda: chain(add.s(1, 2), group(mul.s(2), group(mul.s(3), mul.s(object())))),
    "the on_failure step": lambda: chain(add.s(1, 2), on_failure=mark.si(object(), "never")),
}

NOT_FITTING: dict[str, Callable[[], Chain | Group]] = {
    "the first step, an argument short": lambda: chain(add.s(1), mul.s(2)),
    "a chain step given the previous result too": lambda: chain(add.s(1, 2), mul.s(1, 2)),
    "a one-argument task after a step, without si()": lambda: chain(add.s(1, 2), const.s("x")),
    "a group member after a step": lambda: chain(add.s(1, 2), group(mul.s(2), mul.s())),
    "a chord's follow-up with an extra argument": lambda: chain(group(ident.s(1), ident.s(2)), total.s(3)),
    "an unknown keyword": lambda: group(ident.s(1), ident.s(value=1, other=2)),
    "the on_failure step": lambda: chain(add.s(1, 2), on_failure=const.si()),
}


@pytest.fixture
def bound_app(broker_url: str) -> Iterator[TaskForge]:
    with bound(wfapp.app, broker_url) as app:
        yield app


def keyspace(app: TaskForge) -> dict[str, str]:
    """Every key with its type: what a refused delay() must leave exactly as it was."""
    client = app.broker.client
    return {text(key): text(client.type(key)) for key in client.scan_iter(count=1000)}


@pytest.mark.parametrize("where", list(UNSERIALIZABLE))
def test_an_argument_that_cannot_be_serialized_stores_nothing(bound_app: TaskForge, where: str) -> None:
    before = keyspace(bound_app)
    with pytest.raises(SerializationError, match="nothing was stored"):
        UNSERIALIZABLE[where]().delay()
    assert keyspace(bound_app) == before


@pytest.mark.parametrize("where", list(NOT_FITTING))
def test_arguments_that_do_not_fit_the_task_store_nothing(bound_app: TaskForge, where: str) -> None:
    before = keyspace(bound_app)
    with pytest.raises(TypeError):
        NOT_FITTING[where]().delay()
    assert keyspace(bound_app) == before


def test_the_same_workflow_with_good_arguments_is_stored(bound_app: TaskForge) -> None:
    """The control: what the refused calls would have written, written by a good one."""
    before = keyspace(bound_app)
    h = chain(add.s(1, 2), mul.s(3), on_failure=mark.si("failed", "never")).delay()
    added = set(keyspace(bound_app)) - set(before)
    assert any(h.id in key for key in added)  # the workflow's own keys, and its first step's
    assert bound_app.broker.jobs.read("wf", f"{h.id}.0") is not None
