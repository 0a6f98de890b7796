"""Find sync/async twins: functions written twice, once on redis-py and once on redis.asyncio.

A pair is an ``async def`` and a plain ``def`` whose names agree once the
async one's ``a`` prefix is dropped (``acancel``/``cancel``, ``_aenqueue``/
``_enqueue``, or the same name, as methods of ``AsyncFlow``/``Flow`` or
functions of ``aio_delivery.py``/``delivery.py``). Their bodies are compared
after what only the colour changes is stripped: ``await``, ``async for`` and
``async with``, the ``a`` prefixes of such names, ``aio_`` module prefixes and
``Async`` class prefixes, the docstring, comments and line wrapping (each body
is read as ast and written back by ``ast.unparse``). A pair is a twin when
the longer body has ``MIN_LINES`` lines or more and ``difflib`` rates the two
more than ``MIN_RATIO`` alike: code that a reader would have to keep in step
by hand.

Files generated from their async source (their first line is ``GENERATED``)
are skipped: a check keeps them in step, not a reader.
"""

from __future__ import annotations

import ast
import difflib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

MIN_LINES = 6
MIN_RATIO = 0.5
# The first line of a module written by the unasync step (``scripts/make_sync.py``).
GENERATED = "# Generated from its async source by scripts/make_sync.py: do not edit."

AnyDef = ast.FunctionDef | ast.AsyncFunctionDef


@dataclass(frozen=True)
class Found:
    """One function of the package: where it is (``path:Class.name``) and its node."""

    where: str
    node: AnyDef


def functions(root: Path) -> Iterator[Found]:
    """Every function and method under ``root`` (nested ones too), but those of generated files."""
    for path in sorted(root.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if text.startswith(GENERATED):
            continue
        where = path.relative_to(root.parent).as_posix()
        yield from _walk(ast.parse(text), where, [])


def _walk(node: ast.AST, where: str, scope: list[str]) -> Iterator[Found]:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield Found(f"{where}:{'.'.join([*scope, child.name])}", child)
            yield from _walk(child, where, [*scope, child.name])
        elif isinstance(child, ast.ClassDef):
            yield from _walk(child, where, [*scope, child.name])


def sync_name(async_name: str, sync_names: set[str]) -> str:
    """The name an async function's sync twin would have: ``acancel`` -> ``cancel`` when that exists."""
    for prefix in ("a", "_a"):
        if async_name.startswith(prefix):
            rest = ("_" if prefix == "_a" else "") + async_name[len(prefix) :]
            if rest in sync_names:
                return rest
    return async_name


class _Uncolour(ast.NodeTransformer):
    """What only the colour changes, removed: awaits, async blocks, a-/aio_/Async prefixes."""

    def __init__(self, sync_names: set[str]) -> None:
        self.sync_names = sync_names

    def name(self, name: str) -> str:
        name = re.sub(r"^Async(?=[A-Z])", "", re.sub(r"^aio_", "", name))
        return sync_name(name, self.sync_names)

    def visit_Await(self, node: ast.Await) -> ast.AST:
        return self.visit(node.value)

    def visit_AsyncFor(self, node: ast.AsyncFor) -> ast.AST:
        return self.visit(
            ast.copy_location(ast.For(node.target, node.iter, node.body, node.orelse, node.type_comment), node)
        )

    def visit_AsyncWith(self, node: ast.AsyncWith) -> ast.AST:
        return self.visit(ast.copy_location(ast.With(node.items, node.body, node.type_comment), node))

    def visit_Name(self, node: ast.Name) -> ast.AST:
        node.id = self.name(node.id)
        return node

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        node.attr = self.name(node.attr)
        return self.generic_visit(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> ast.AST:
        node.module = node.module and ".".join(self.name(part) for part in node.module.split("."))
        for alias in node.names:
            alias.name = self.name(alias.name)
        return node


def body_lines(node: AnyDef, sync_names: set[str]) -> list[str]:
    """A function's body as compared: no docstring, uncoloured, one statement's line per line."""
    body = list(node.body)
    first = body[0] if body else None
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        body = body[1:]
    module = ast.Module(body=body, type_ignores=[])
    plain = _Uncolour(sync_names).visit(ast.parse(ast.unparse(module)))
    return [line.strip() for line in ast.unparse(plain).splitlines() if line.strip()]


def twins(root: Path) -> dict[tuple[str, str], float]:
    """Every (async, sync) pair under ``root`` more than ``MIN_RATIO`` alike over ``MIN_LINES`` lines or more."""
    found = list(functions(root))
    syncs: dict[str, list[Found]] = {}
    for f in found:
        if isinstance(f.node, ast.FunctionDef):
            syncs.setdefault(f.node.name, []).append(f)
    names = set(syncs)
    pairs: dict[tuple[str, str], float] = {}
    for a in found:
        if not isinstance(a.node, ast.AsyncFunctionDef):
            continue
        candidates = {*syncs.get(a.node.name, ()), *syncs.get(sync_name(a.node.name, names), ())}
        lines = body_lines(a.node, names)
        for s in sorted(candidates, key=lambda f: f.where):
            other = body_lines(s.node, names)
            if max(len(lines), len(other)) < MIN_LINES:
                continue
            ratio = difflib.SequenceMatcher(None, lines, other, autojunk=False).ratio()
            if ratio > MIN_RATIO:
                pairs[(a.where, s.where)] = ratio
    return pairs
