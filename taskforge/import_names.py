"""The dotted names a worker imports the user's code by: a task's module, and the app's ``include=``.

A task's name starts with its module's name, and a worker finds the task by
importing that module, so producer and worker must spell it alike even when
the producer runs as a script (``__main__``).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from .errors import ConfigurationError


def module_name(func: Callable[..., Any]) -> str:
    """The module a function belongs to, as a worker importing it would name it.

    Run as ``python myapp.py``, a module is ``__main__``; the worker imports it
    as ``myapp``.  Naming it by its file, relative to ``sys.path``, makes the
    task names of producer and worker identical.
    """
    module = getattr(func, "__module__", None) or "__main__"
    if module != "__main__":
        return module
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    if spec is not None and spec.name and spec.name != "__main__":
        return str(spec.name)  # "pkg.__main__" for python -m pkg: what a worker must import
    path = getattr(main, "__file__", None)
    if not path:
        return module
    file = Path(path).resolve()
    for entry in sys.path:
        try:
            rel = file.relative_to(Path(entry or os.getcwd()).resolve())
        except ValueError:
            continue
        parts = rel.with_suffix("").parts
        if all(part.isidentifier() for part in parts):
            return ".".join(parts)
    return file.stem


def module_names(include: Sequence[str]) -> tuple[str, ...]:
    """``TaskForge(include=...)`` as dotted module names, refused where it is given when it is not a list of them."""
    names: list[object] = [include] if isinstance(include, str) else list(include) if _listlike(include) else [None]
    for name in names:
        if not isinstance(name, str) or not all(part.isidentifier() for part in name.split(".")):
            raise ConfigurationError(
                f"include={include!r}: use a list of dotted module names, e.g. include=['proj.tasks']"
            )
    return tuple(str(name) for name in names)


def _listlike(value: object) -> bool:
    return isinstance(value, (list, tuple))
