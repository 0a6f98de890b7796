"""The ``@app.task`` options are declared once (``taskforge/decorator_options.py``); every copy is held to it.

What a user's type checker reads must stay written out: the decorator's typed
overload in ``app.py``, ``Task.with_options`` and ``apply_async``. These tests
read those signatures from the source (ast, so the overload is seen on every
Python) and compare each name, type and default with the declaration; the
options table of the docs must be the one the declaration renders; and
``TaskOptions`` must keep a field for each option a job keeps. Adding an
option to the declaration alone, or to a signature alone, fails here.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
from pathlib import Path
from typing import Any

import pytest

import taskforge
import taskforge.app
import taskforge.task
from taskforge import ConfigurationError, TaskForge
from taskforge.decorator_options import DECLARED, OPTION_NAMES, PER_CALL, DecoratorOptions, Keep, options_table
from taskforge.task_options import TaskOptions

PACKAGE = Path(taskforge.__file__).parent
REPO = PACKAGE.parent
DECLARED_TYPES = {f.name: f.type for f in dataclasses.fields(DecoratorOptions)}
CALL_ONLY = ["job_id", "key"]  # with_options's own: the call's job id and key, not options of the task
KEPT_BY_WITH_OPTIONS_ONLY = {
    "job_id",
    "call_key",
    "retry_set_per_call",
    "shared_limits",
}  # shared_limits: set by the app

Parameter = tuple[str, str, Any]  # (name, annotation as normalised source, default value)


def normalised(annotation: str) -> str:
    return ast.unparse(ast.parse(annotation, mode="eval"))


def keyword_parameters(source: str, function: str, namespace: dict[str, Any], overloaded: bool) -> list[Parameter]:
    """The keyword-only parameters of ``function`` in ``source`` (its overload that has any, when ``overloaded``)."""
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or node.name != function:
            continue
        is_overload = any(ast.unparse(d) in ("overload", "typing.overload") for d in node.decorator_list)
        if is_overload != overloaded or not node.args.kwonlyargs:
            continue
        return [
            (arg.arg, normalised(ast.unparse(arg.annotation)) if arg.annotation else "", eval_default(d, namespace))
            for arg, d in zip(node.args.kwonlyargs, node.args.kw_defaults, strict=True)
        ]
    raise AssertionError(f"no {function} with keyword-only parameters")


def eval_default(node: ast.expr | None, namespace: dict[str, Any]) -> Any:
    return None if node is None else eval(compile(ast.Expression(node), "<default>", "eval"), namespace)  # noqa: S307


def declared_parameters() -> list[Parameter]:
    return [(name, normalised(DECLARED_TYPES[name]), DECLARED[name].default) for name in DECLARED]


def differences(found: list[Parameter], expected: list[Parameter]) -> list[str]:
    """What differs, in words: a missing or extra name, a name out of order, another type or default."""
    found_names, expected_names = [p[0] for p in found], [p[0] for p in expected]
    problems = [f"missing {name}" for name in expected_names if name not in found_names]
    problems += [f"not declared: {name}" for name in found_names if name not in expected_names]
    if not problems and found_names != expected_names:
        problems.append(f"order {found_names} is not the declaration's {expected_names}")
    wanted = {p[0]: p for p in expected}
    for name, annotation, default in found:
        if name in wanted and annotation != wanted[name][1]:
            problems.append(f"{name}: {annotation} where the declaration says {wanted[name][1]}")
        if name in wanted and (type(default), default) != (type(wanted[name][2]), wanted[name][2]):
            problems.append(f"{name}: default {default!r} where the declaration says {wanted[name][2]!r}")
    return problems


def overload_of_task(source: str) -> list[Parameter]:
    return keyword_parameters(source, "task", vars(taskforge.app), overloaded=True)


def with_options_expected() -> list[Parameter]:
    """Each per-call option as ``with_options`` must take it: its declared type, or its keep default, as a default."""
    expected = []
    for name in PER_CALL:
        declared, keep = DECLARED_TYPES[name], DECLARED[name].keep
        parts = [ast.unparse(p) for p in union_parts(ast.parse(declared, mode="eval").body)]
        extra = "None" if keep is None else f"Literal[{type(keep).__name__}.{keep.name}]"
        annotation = " | ".join([*parts, extra] if extra not in parts else parts)
        expected.append((name, normalised(annotation), keep))
    return expected


def union_parts(node: ast.expr) -> list[ast.expr]:
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return [*union_parts(node.left), *union_parts(node.right)]
    return [node]


def test_the_decorators_typed_overload_is_the_declaration() -> None:
    source = (PACKAGE / "app.py").read_text()
    assert differences(overload_of_task(source), declared_parameters()) == []


def test_the_comparison_sees_a_changed_default_type_or_name() -> None:
    source = (PACKAGE / "app.py").read_text()
    assert "        max_attempts: int = 3,\n" in source
    changed = [
        source.replace("        max_attempts: int = 3,\n", "        max_attempts: int = 4,\n"),
        source.replace("        max_attempts: int = 3,\n", "        max_attempts: float = 3,\n"),
        source.replace("        max_attempts: int = 3,\n", "        max_attempt: int = 3,\n"),
        source.replace("        max_attempts: int = 3,\n", ""),
    ]
    for text in changed:
        assert differences(overload_of_task(text), declared_parameters()), text


def test_with_options_takes_the_per_call_options_then_the_calls_own() -> None:
    source = (PACKAGE / "task.py").read_text()
    namespace = {**vars(taskforge.task), "Keep": Keep}
    found = keyword_parameters(source, "with_options", namespace, overloaded=False)
    call_own = [("job_id", "str | None", None), ("key", "str | None", None)]
    assert [p[0] for p in found] == [*PER_CALL, *CALL_ONLY]
    assert differences(found, [*with_options_expected(), *call_own]) == []
    assert set(PER_CALL) <= OPTION_NAMES and not set(CALL_ONLY) & set(PER_CALL)


@pytest.mark.parametrize("method", ["apply_async", "aapply_async"])
def test_apply_async_hands_with_options_the_same_queue_priority_and_id(method: str) -> None:
    source = (PACKAGE / "task.py").read_text()
    namespace = {**vars(taskforge.task), "Keep": Keep}
    with_options = {p[0]: p for p in keyword_parameters(source, "with_options", namespace, overloaded=False)}
    celery = {p.name: p for p in inspect.signature(getattr(taskforge.task.Task, method)).parameters.values()}
    for name, theirs in (("queue", "queue"), ("priority", "priority"), ("task_id", "job_id")):
        assert normalised(str(celery[name].annotation)) == with_options[theirs][1], name
        assert celery[name].default is None and with_options[theirs][2] is None, name


def test_task_options_keeps_each_stored_option_and_what_with_options_sets() -> None:
    kept = [f.name for f in dataclasses.fields(TaskOptions)]
    stored = [name for name, declared in DECLARED.items() if declared.stored]
    assert sorted(kept) == sorted([*stored, *KEPT_BY_WITH_OPTIONS_ONLY])
    defaults = TaskOptions()
    built = taskforge.decorator_options.build(DecoratorOptions())
    assert built == defaults  # the declaration's defaults make the options of a bare @app.task


def docs_pages() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def table_start(lines: list[str]) -> int | None:
    """Where the options table starts: its header, then (after the rule) the row of the first option."""
    header, _, first = options_table().splitlines()[:3]
    first_cell = first.split(" | ")[0]
    found = [i for i, line in enumerate(lines[:-2]) if line == header and lines[i + 2].startswith(first_cell + " |")]
    return found[0] if found else None


def test_the_options_table_of_the_docs_is_the_declarations() -> None:
    holders = [
        page for page in docs_pages() if page.exists() and table_start(page.read_text().splitlines()) is not None
    ]
    assert len(holders) == 1, f"the options table should be on one page: {holders}"
    lines = holders[0].read_text().splitlines()
    start = table_start(lines)
    assert start is not None
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines))
    assert "\n".join(lines[start:end]) == options_table(), f"the table in {holders[0]} should be:\n{options_table()}"


def test_a_declared_check_refuses_at_decoration_and_in_with_options_alike() -> None:
    app = TaskForge("t", broker="memory://")
    task = app.task(name="t")(len)
    for name in PER_CALL:
        value: Any = {"priority": "urgent", "retry_on": 3, "dont_retry_on": "x"}.get(name, -1)
        with pytest.raises(ConfigurationError) as decorating:
            app.task(name=f"bad-{name}", **{name: value})  # type: ignore[call-overload]
        with pytest.raises(ConfigurationError) as calling:
            task.with_options(**{name: value})
        assert str(decorating.value) == str(calling.value), name
    assert list(app.tasks) == ["t"]


def test_with_options_keeps_what_it_is_not_given_and_pairs_the_retry_filters() -> None:
    app = TaskForge("t", broker="memory://")
    task = app.task(name="t", timeout=30, retry_on=KeyError, max_attempts=5)(len)
    same = task.with_options()
    assert same.options == task.options and same.registered
    assert task.with_options(timeout=None).options.timeout is None  # None is "no timeout", not "keep"
    only = task.with_options(dont_retry_on=ValueError).options
    assert only.retry_on is None and only.dont_retry_on == (ValueError,) and only.retry_set_per_call
    assert not task.with_options(queue="other").options.retry_set_per_call
    sent_by_name = app.task_for("elsewhere.t")
    assert not sent_by_name.with_options(queue="q").registered  # the worker's definition still decides
    assert sent_by_name.with_options(max_attempts=2).registered  # an explicit max_attempts wins over it
    with pytest.raises(ConfigurationError, match="together"):
        task.with_options(retry_on=KeyError, dont_retry_on=ValueError)


USER_MODULE = """\
from taskforge import Task, TaskForge

app = TaskForge("typed", broker="memory://")


@app.task(queue="mail", max_attempts=5, rate_limit="10/s", retry_on=(KeyError,), expires=60.0)
def send(to: str) -> int:
    return len(to)


checked: Task[[str], int] = send
copy: Task[[str], int] = send.with_options(timeout=None, priority="high", job_id="j-1")


@app.task(max_attempts="3")  # wrong
def bad_count() -> None: ...


@app.task(queu="mail")  # wrong
def bad_name() -> None: ...


send.with_options(max_attempts=2.5)  # wrong
send.apply_async(("a",), queue=3)  # wrong
"""


@pytest.mark.slow
def test_users_mypy_sees_every_option_typed(tmp_path: Path) -> None:
    from mypy import api

    module = tmp_path / "user_options.py"
    module.write_text(USER_MODULE)
    out, err, _ = api.run(["--strict", "--no-error-summary", "--cache-dir", str(tmp_path / "cache"), str(module)])
    wrong = [n for n, line in enumerate(USER_MODULE.splitlines(), 1) if line.endswith("# wrong")]
    flagged = sorted({int(line.split(":")[1]) for line in out.splitlines() if ": error:" in line})
    assert flagged == wrong, out + err
