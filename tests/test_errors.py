"""The error tree: every ``TaskforgeError`` of the package lives in ``taskforge.errors`` and in its drawing."""

from __future__ import annotations

import importlib
import pkgutil
import re

import pytest

import taskforge
from taskforge import errors
from taskforge.errors import TaskforgeError, UnknownTask

# "    ├── Name   comment": the indent before the branch gives the depth.
TREE_LINE = re.compile(r"^(?P<indent>[ │]*)[├└]── (?P<name>\w+)")


def all_modules() -> list[str]:
    """Every module of the package, imported, so that each error class it defines is known."""
    names = []
    for module in pkgutil.walk_packages(taskforge.__path__, "taskforge."):
        if module.name.endswith("__main__") or module.name.startswith("taskforge.contrib.django"):
            continue  # contrib.django needs Django 6 (Python 3.12+); it defines no error class
        importlib.import_module(module.name)
        names.append(module.name)
    return names


def subclasses(root: type) -> set[type]:
    found = set()
    for child in root.__subclasses__():
        found |= {child, *subclasses(child)}
    return found


def drawn_tree() -> dict[str, str]:
    """name -> parent name, as the docstring of ``taskforge.errors`` draws it."""
    doc = errors.__doc__ or ""
    parents: dict[str, str] = {}
    stack = ["TaskforgeError"]
    for line in doc.splitlines():
        match = TREE_LINE.match(line.strip("\n")[4:])  # the drawing is indented four spaces
        if not match:
            continue
        depth = len(match["indent"]) // 4
        del stack[depth + 1 :]
        parents[match["name"]] = stack[depth]
        stack.append(match["name"])
    return parents


def test_every_taskforge_error_is_in_errors_and_drawn_under_its_parent() -> None:
    assert len(all_modules()) > 30
    tree = drawn_tree()
    assert "ConfigurationError" in tree, "the drawing in taskforge.errors was not found"
    ours = {cls for cls in subclasses(TaskforgeError) if cls.__module__.startswith("taskforge.")}
    for cls in sorted(ours, key=lambda c: c.__name__):
        name = cls.__name__
        assert getattr(errors, name, None) is cls, f"{cls.__module__}.{name} is not defined in taskforge.errors"
        assert name in errors.__all__, f"{name} is missing from taskforge.errors.__all__"
        assert name in tree, f"{name} is not drawn in the tree of taskforge.errors"
        parent = next(base for base in cls.__mro__[1:] if issubclass(base, TaskforgeError))
        assert tree[name] == parent.__name__, f"{name} is drawn under {tree[name]}, but derives from {parent.__name__}"
    assert set(tree) == {cls.__name__ for cls in ours}, "the tree draws a class that does not exist"


def test_errors_all_is_sorted_and_real() -> None:
    names = errors.__all__
    assert names == sorted(names) and len(names) == len(set(names))
    assert all(hasattr(errors, name) for name in names)
    public_classes = {n for n, v in vars(errors).items() if isinstance(v, type) and issubclass(v, BaseException)}
    assert public_classes <= set(names), f"public but not in __all__: {public_classes - set(names)}"


@pytest.mark.parametrize(
    ("old_home", "name"),
    [
        ("taskforge.loader", "AppNotFound"),
        ("taskforge.devbroker", "BrokerStartError"),
        ("taskforge.metrics", "MetricsPortUnavailable"),
        ("taskforge.dashboard.server", "DashboardPortUnavailable"),
    ],
)
def test_errors_moved_into_errors_keep_their_old_import_path(old_home: str, name: str) -> None:
    assert getattr(importlib.import_module(old_home), name) is getattr(errors, name)


def test_unknown_task_names_the_task_the_app_and_what_it_knows() -> None:
    error = UnknownTask.named("billing.charge", "shop", ["shop.b", "shop.a"])
    assert isinstance(error, TaskforgeError) and error.task == "billing.charge"
    assert str(error) == (
        "no task named 'billing.charge' is registered in app 'shop' (known: shop.a, shop.b); "
        "deploy the code that defines it, then retry the dead job"
    )
    assert "(known: none)" in str(UnknownTask.named("x", "empty", []))
