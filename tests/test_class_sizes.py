"""No class of the package grows into a catch-all, and the workflows need no ``type: ignore``.

Read from the source (ast), so a class is counted whether or not its module
imports here (``contrib`` needs its integrations): its public methods and
properties, with what it inherits from classes of the package (``TaskForge``,
the user's facade, included), never from ``str`` or ``tuple``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import taskforge

PACKAGE = Path(taskforge.__file__).parent
LIMIT = 25

Key = tuple[str, str]  # (module, class name)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def read_package() -> tuple[dict[Key, ast.ClassDef], dict[Key, Key]]:
    """Every class of the package, and every name a module imports from the package: (module, name) -> source."""
    classes: dict[Key, ast.ClassDef] = {}
    names: dict[Key, Key] = {}
    for path in PACKAGE.rglob("*.py"):
        module = module_name(path)
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                classes[(module, node.name)] = node
            elif isinstance(node, ast.ImportFrom):
                base = package.split(".")
                source = ".".join(base[: len(base) - node.level + 1] + ([node.module] if node.module else []))
                if node.level == 0:
                    source = node.module or ""
                for alias in node.names:
                    names[(module, alias.asname or alias.name)] = (source, alias.name)
    return classes, names


def resolve(key: Key, classes: dict[Key, ast.ClassDef], names: dict[Key, Key]) -> Key | None:
    for _ in range(5):  # through re-exports (taskforge/broker/__init__.py)
        if key in classes:
            return key
        if key not in names:
            return None
        key = names[key]
    return None


def public(key: Key, classes: dict[Key, ast.ClassDef], names: dict[Key, Key]) -> set[str]:
    node = classes[key]
    found = {
        item.name
        for item in node.body
        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and not item.name.startswith("_")
    }
    for base in node.bases:
        name = ast.unparse(base).split("[")[0]
        parent = resolve((key[0], name), classes, names)
        if parent is not None and parent != key:
            found |= public(parent, classes, names)
    return found


def test_no_class_of_the_package_exposes_more_than_25_public_methods() -> None:
    classes, names = read_package()
    sizes = {f"{m}.{c}": len(public((m, c), classes, names)) for m, c in classes}
    assert sizes["taskforge.app.TaskForge"] > 10  # the reader sees the facade and what it inherits
    over = {name: size for name, size in sizes.items() if size > LIMIT}
    assert not over, over


def test_the_counter_follows_package_bases_and_re_exports() -> None:
    classes, names = read_package()
    # DjangoTaskForge is a TaskForge (imported by name): what it inherits counts as its own.
    counted = public(("taskforge.contrib.django.backend", "DjangoTaskForge"), classes, names)
    assert {"task", "drain", "job", "workflow"} <= counted


def test_no_type_ignore_in_the_workflows() -> None:
    found = [
        f"{path.relative_to(PACKAGE)}:{number}"
        for path in sorted((PACKAGE / "workflows").rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if "type: ignore" in line
    ]
    assert not found, found
