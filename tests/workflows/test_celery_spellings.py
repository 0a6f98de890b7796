"""Celery's canvas spellings: ``|`` for chains, ``chord``, and errors naming the taskforge way for the rest.

The workflows run in-process (``app.drain()``) on memory:// and real Redis:
a spelling is right when it builds the same workflow and gives the same
result as the taskforge spelling it stands for.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from taskforge import TaskFailed, TaskForge, WorkflowHandle, WorkflowState, chain, chord, group
from taskforge.celery_names import WORKFLOW
from taskforge.errors import ConfigurationError
from taskforge.workflows.canvas import Chain

from . import wfapp
from .conftest import bound
from .wfapp import add, ident, mul, refuse, total


@pytest.fixture
def drained_app(broker_url: str) -> Iterator[TaskForge]:
    with bound(wfapp.app, broker_url) as app:
        yield app


def test_a_pipe_of_signatures_is_a_chain() -> None:
    piped = add.s(1, 2) | mul.s(10) | ident.s()
    assert isinstance(piped, Chain)
    assert piped.items == chain(add.s(1, 2), mul.s(10), ident.s()).items


def test_pipes_flatten_chains_on_either_side_and_keep_groups() -> None:
    left = chain(add.s(1, 2), mul.s(2))
    right = chain(mul.s(3), ident.s())
    assert (left | right).items == chain(add.s(1, 2), mul.s(2), mul.s(3), ident.s()).items
    assert (add.s(1, 2) | right).items == (add.s(1, 2), mul.s(3), ident.s())
    assert (left | ident.s()).items == (add.s(1, 2), mul.s(2), ident.s())
    fan = group(mul.s(2), mul.s(3))
    piped = add.s(1, 1) | fan | total.s()
    assert [type(item).__name__ for item in piped.items] == ["Signature", "Group", "Signature"]
    assert piped.items[1] is fan


def test_a_pipe_keeps_the_on_failure_of_one_side_and_refuses_two() -> None:
    alert = ident.si("failed")
    assert (chain(add.s(1, 2), on_failure=alert) | mul.s(2)).on_failure == alert
    assert (add.s(1, 2) | chain(mul.s(2), on_failure=alert)).on_failure == alert
    with pytest.raises(ConfigurationError, match="on_failure"):
        _ = chain(add.s(1, 2), on_failure=alert) | chain(mul.s(2), on_failure=alert)
    with pytest.raises(ConfigurationError, match=r"task\.s\(\.\.\.\)"):
        _ = add.s(1, 2) | add  # type: ignore[operator]


def test_piped_workflows_give_the_results_of_their_chains(drained_app: TaskForge) -> None:
    h = (add.s(1, 2) | group(mul.s(10), mul.s(2)) | total.s()).delay()
    drained_app.drain()
    assert h.result(timeout=5) == 36
    h = (chain(add.s(1, 1), mul.s(5)) | (mul.s(2) | ident.s())).delay()
    drained_app.drain()
    assert h.result(timeout=5) == 20


def test_chord_header_then_body_sends_at_once(drained_app: TaskForge) -> None:
    h = chord([add.s(i, i) for i in range(10)])(total.s())
    assert isinstance(h, WorkflowHandle)
    assert h.status() is WorkflowState.RUNNING
    drained_app.drain()
    assert h.result(timeout=5) == 90
    steps = h.info().steps
    assert [s.task for s in steps] == [add.name] * 10 + [total.name]


def test_chord_with_its_body_is_a_workflow_not_sent_yet(drained_app: TaskForge) -> None:
    c = chord((mul.s(i, 2) for i in range(3)), total.s())
    assert repr(c.as_chain()) == repr(chain(group(mul.s(0, 2), mul.s(1, 2), mul.s(2, 2)), total.s()))
    handles = [c.delay(), c(), chord(group(mul.s(1, 2), mul.s(2, 2)), total.s())()]
    piped = (c | mul.s(10)).delay()
    nested = chain(add.s(0, 1), chord([mul.s(2), mul.s(3)], total.s()), ident.s()).delay()
    drained_app.drain()
    assert [h.result(timeout=5) for h in handles] == [6, 6, 6]
    assert piped.result(timeout=5) == 60
    assert nested.result(timeout=5) == 5


def test_chord_misuse_says_how() -> None:
    with pytest.raises(ConfigurationError, match="no body"):
        chord([add.s(1, 2)]).delay()
    with pytest.raises(ConfigurationError, match="has a body already"):
        chord([add.s(1, 2)], total.s())(total.s())


def test_calling_a_chain_or_a_group_names_delay() -> None:
    with pytest.raises(TypeError, match=r"chain\(\.\.\.\)\.delay\(\)"):
        chain(add.s(1, 2), mul.s(2))()
    with pytest.raises(TypeError, match=r"group\(\.\.\.\)\.delay\(\)"):
        group(add.s(1, 2), mul.s(1, 2))()


def test_a_workflow_handle_gets_its_result_as_celery_spells_it(drained_app: TaskForge) -> None:
    h = chord([add.s(i, i) for i in range(4)])(total.s())
    drained_app.drain()
    assert h.get(timeout=5) == 12 == h.result(timeout=5)
    assert asyncio.run(h.aget(timeout=5)) == 12
    with pytest.raises(TypeError, match=r"WorkflowHandle\.get\(\): propagate=: .* always raises TaskFailed"):
        h.get(timeout=5, propagate=False)  # type: ignore[call-arg]


def test_celery_result_names_on_a_workflow_handle_name_the_taskforge_way(drained_app: TaskForge) -> None:
    h = chain(add.s(1, 2), mul.s(2)).delay()
    with pytest.raises(AttributeError, match=r"WorkflowHandle has no 'state' \(a Celery name\): handle\.status\(\)"):
        _ = h.state  # type: ignore[attr-defined]
    with pytest.raises(AttributeError, match="object has no attribute 'stat'$"):
        _ = h.stat  # type: ignore[attr-defined]
    for name in WORKFLOW:
        with pytest.raises(AttributeError, match="a Celery name"):
            getattr(h, name)


def test_a_dead_workflow_raises_taskfailed_with_the_steps_error_type(drained_app: TaskForge) -> None:
    h = (add.s(1, 2) | refuse.s() | mul.s(2)).delay()
    drained_app.drain()
    with pytest.raises(TaskFailed) as caught:
        h.result(timeout=5)
    assert (caught.value.error_type, caught.value.task) == ("builtins.ValueError", refuse.name)
    with pytest.raises(TaskFailed) as awaited:
        asyncio.run(h.aresult(timeout=5))
    assert awaited.value.error_type == "builtins.ValueError"


def test_apply_async_of_a_chain_group_or_chord_names_delay() -> None:
    for what, sendable in [
        ("chain", chain(add.s(1, 2), mul.s(2))),
        ("group", group(add.s(1, 2), mul.s(1, 2))),
        ("chord", chord([add.s(1, 2)], total.s())),
    ]:
        with pytest.raises(TypeError, match=rf"{what}\(\.\.\.\)\.apply_async\(\.\.\.\) .* {what}\(\.\.\.\)\.delay\(\)"):
            sendable.apply_async()


def test_a_signature_called_or_given_more_arguments_names_the_whole_call(drained_app: TaskForge) -> None:
    with pytest.raises(TypeError, match=r"call the task itself, add\(\.\.\.\)"):
        add.s(1, 2)()
    with pytest.raises(
        TypeError, match=r"Celery's partial call: .* write tests\.workflows\.wfapp\.add\.s\(4, 2\)\.delay"
    ):
        add.s(2).delay(4)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"add\.s\(2, y=4\)\.adelay\(\)"):
        asyncio.run(add.s(2).adelay(y=4))  # type: ignore[arg-type]
    assert drained_app.drain() == []  # nothing was stored
    assert add.s(1, 2).delay().id


def test_celery_signature_spellings_name_the_taskforge_way() -> None:
    sig = add.s(1, 2)
    with pytest.raises(TypeError, match=r"add\.with_options\(queue=\.\.\.\)\.s\(\.\.\.\)"):
        sig.set(queue="img")
    with pytest.raises(TypeError, match=r"with_options\(priority=\.\.\.\)\.si"):
        add.si(1, 2).set(priority="high")
    with pytest.raises(TypeError, match=r"task\.s\(\*args, \*\*kwargs\)"):
        sig.signature()
    with pytest.raises(TypeError, match=r"\.delay\(\)"):
        sig.apply_async(countdown=10)


USER_MODULE = """
from taskforge import TaskForge, WorkflowHandle, chain, chord, group
from taskforge.workflows.canvas import Chain

app = TaskForge("t", broker="memory://")


@app.task
def add(x: int, y: int) -> int:
    return x + y


@app.task
def total(values: list[int]) -> int:
    return sum(values)


piped: Chain = add.s(1, 2) | add.s(3) | group(add.s(1), add.s(2)) | total.s()
more: Chain = chain(add.s(1, 2)) | piped | chord([add.s(1)], total.s())
h: WorkflowHandle[object] = chord([add.s(i, i) for i in range(3)])(total.s())
later: WorkflowHandle[object] = chord([add.s(1, 1)], total.s()).delay()
wrong = add.s(1, 2) | 3
"""


@pytest.mark.slow
def test_users_mypy_sees_the_spellings(tmp_path: Path) -> None:
    from mypy import api

    module = tmp_path / "user_canvas.py"
    module.write_text(USER_MODULE)
    out, err, _ = api.run(["--strict", "--cache-dir", str(tmp_path / "cache"), str(module)])
    errors = [line for line in out.splitlines() if ": error:" in line]
    wrong = USER_MODULE.splitlines().index("wrong = add.s(1, 2) | 3") + 1
    assert errors == [
        f'{module}:{wrong}: error: Unsupported operand types for | ("Signature[int]" and "int")  [operator]'
    ], out + err


def test_an_on_failure_built_with_s_must_take_the_summary(drained_app: TaskForge) -> None:
    with pytest.raises(TypeError, match=r"use \.si\(\.\.\.\) to pass nothing"):
        chain(add.s(1, 2), on_failure=total.s([1])).delay()
    assert drained_app.drain() == []  # nothing was stored
