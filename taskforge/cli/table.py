"""Aligned plain-text tables and relative times for the operator commands.

Cells are padded before they are styled, so colour codes (written only to a
terminal: ``click.echo`` strips them otherwise) never break the alignment.
Every cell's text goes through ``printable``: a task name, key or queue
holding a newline or an escape sequence shows it escaped, and can neither
add a row nor drive the terminal.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone

import click

from ..printable import printable


@dataclass(frozen=True)
class Cell:
    text: str
    fg: str | None = None
    bold: bool = False
    right: bool = False


def cell(value: object, fg: str | None = None, bold: bool = False) -> Cell:
    """A cell; numbers are right-aligned."""
    return Cell(str(value), fg=fg, bold=bold, right=isinstance(value, int))


def count(value: int, fg: str) -> Cell:
    """A count, coloured only when it is not zero."""
    return cell(value, fg=fg if value else None)


def render(headers: Sequence[str], rows: Sequence[Sequence[Cell]]) -> str:
    rows = [[Cell(printable(c.text), c.fg, c.bold, c.right) for c in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in rows:
        for i, c in enumerate(row):
            widths[i] = max(widths[i], len(c.text))
    lines = ["  ".join(click.style(h.ljust(w), bold=True) for h, w in zip(headers, widths, strict=True)).rstrip()]
    for row in rows:
        parts = []
        for c, w in zip(row, widths, strict=True):
            text = c.text.rjust(w) if c.right else c.text.ljust(w)
            parts.append(click.style(text, fg=c.fg, bold=c.bold) if c.fg or c.bold else text)
        lines.append("  ".join(parts).rstrip())
    return "\n".join(lines)


def relative(when: datetime | None, now: datetime) -> str:
    """'in 3.2 s', '4 min ago', or '-'."""
    if when is None:
        return "-"
    seconds = (when - now).total_seconds()
    text = span(abs(seconds))
    return f"in {text}" if seconds > 0 else f"{text} ago"


def span(seconds: float) -> str:
    """'3.2 s', '4.0 min', '1.5 h', '2.0 days'."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    if seconds < 3600:
        return f"{seconds / 60:.1f} min"
    if seconds < 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"


def duration(seconds: float) -> str:
    """A configured length of time, without needless decimals: '1 day', '7 days', '90 min', '30 s'."""
    for unit, size in (("day", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size and seconds % size == 0:
            n = int(seconds // size)
            return f"{n} {unit}s" if unit == "day" and n != 1 else f"{n} {unit}"
    return span(seconds) if seconds >= 60 else f"{seconds:g} s"


def timestamp(when: datetime | None) -> str:
    """An aware datetime, converted to UTC, as '2027-01-01 12:00:03 UTC', or '-'."""
    return when.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC") if when else "-"
