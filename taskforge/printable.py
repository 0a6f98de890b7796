"""Names as they may be printed: control characters escaped, so a name cannot forge a line or drive a terminal.

Task names, keys, queue names and job ids come from whoever sends a job,
and a task name or key may hold any character. Printed raw, a newline in
one forges a second log line (``INFO ... succeeded``), and an escape
sequence (``\\x1b[2J``, ``\\x1b]8;;...``) clears, recolours or rewrites the
operator's terminal. Every place that prints such a name (the CLI's tables
and lines, the worker's log lines and their job context) passes it through
``printable`` first. It imports nothing, so every layer may use it.
"""

from __future__ import annotations

__all__ = ["printable"]


def escape(char: str) -> str:
    """One character as Python writes it in a string literal: ``\\n``, ``\\x1b``, ``\\u202e``."""
    return repr(char)[1:-1]


def printable(value: object, lines: bool = False) -> str:
    """``str(value)`` with every character that is not printable (newlines, tabs, escapes, C1 controls,
    bidirectional overrides, line and paragraph separators) written as its escape; a plain space stays.

    ``lines`` keeps ``\n`` for text made of lines (a traceback), escaping
    the rest. Backslashes are left alone: the aim is a line that cannot be
    forged or run, and a name with a backslash in it still reads as itself.
    """
    text = str(value)
    if text.isprintable():
        return text
    return "".join(char if char.isprintable() or (lines and char == "\n") else escape(char) for char in text)
