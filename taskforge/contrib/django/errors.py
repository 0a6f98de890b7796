"""``TaskError.exception_class_path`` from a job record: always the path of a class that imports.

Django names a task's exception by import path and resolves it lazily
(``TaskError.exception_class``), so a path that does not import breaks
whoever reads the error. A job record names its exception by class path
when it can (``error_type``); older records, and failures the worker itself
records (a crash, a lost lease), carry only the error's text, whose
exception line reads ``Name: message`` as a traceback's does.
"""

from __future__ import annotations

import re

from django.utils.module_loading import import_string

FALLBACK = "taskforge.errors.TaskforgeError"
_EXCEPTION_LINE = re.compile(r"^([A-Za-z_][\w.]*)(?::|$)")


def exception_class_path(error_type: str | None, error: str | None) -> str:
    """The dotted path of the exception that failed a job, for Django's ``TaskError``.

    ``error_type`` is the class path the job record gives (``JobInfo.error_type``),
    used when it imports; only without one is ``error`` (the traceback or
    error text) read: a dotted name as it is, a bare one in ``builtins``
    first, then in ``taskforge.errors``. Anything that does not import as an
    exception class gives ``taskforge.errors.TaskforgeError``.
    """
    if error_type is not None:
        return error_type if _is_exception_class(error_type) else FALLBACK
    for candidate in _named_in(error or ""):
        if _is_exception_class(candidate):
            return candidate
    return FALLBACK


def _named_in(text: str) -> list[str]:
    """The candidate paths of the exception line: the first line after the traceback's frames.

    Frames and their source lines are indented; the exception line is not,
    and a multi-line message or a note follows it, so the last line is not
    always the one to read.
    """
    lines = [line for line in text.strip().splitlines() if line.strip()]
    frames_end = max((i for i, line in enumerate(lines) if line[:1].isspace()), default=-1)
    if frames_end + 1 >= len(lines):
        return []
    found = _EXCEPTION_LINE.match(lines[frames_end + 1])
    if found is None:
        return []
    name = found.group(1)
    return [name] if "." in name else [f"builtins.{name}", f"taskforge.errors.{name}"]


def _is_exception_class(path: str) -> bool:
    try:
        found = import_string(path)
    except Exception:  # no such module or attribute, or a module that fails to import: not a path to give Django
        return False
    return isinstance(found, type) and issubclass(found, BaseException)
