"""A workflow too big for one ``workflow_create`` call, cut into pieces staged then committed at once.

A group of 100,000 members is a record of 300,000 fields and sets of
100,000 members: stored by one script, it held Redis for seconds. Above
``PIECE_UNITS`` (fields, set members and steps opened, about a microsecond
of Redis time each) the record goes in pieces, each a call of its own,
under names no reader knows; ``commit`` renames them into place and marks
the workflow running in one call, so the workflow appears whole, exactly
once, or (its producer died while staging) never: the pieces expire.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from . import batches
from .calls import ScriptCall
from .keys import WorkflowKeys

PIECE_UNITS = 2_000
PIECE_BYTES = 512 * 1024

Fields = Sequence[tuple[str, bytes | str]]


class Piece:
    """One staging call's share: steps ``first`` .. ``last - 1`` to open, and record fields."""

    def __init__(self, first: int = 0, last: int = 0) -> None:
        self.first, self.last = first, last
        self.fields: list[tuple[str, bytes | str]] = []
        self.units = last - first
        self.bytes = 0

    def add(self, name: str, value: bytes | str, units: int = 1) -> None:
        self.fields.append((name, value))
        self.units += units
        self.bytes += len(value)

    def full(self) -> bool:
        return self.units >= PIECE_UNITS or self.bytes >= PIECE_BYTES


def split(steps: int, fields: Fields) -> list[Piece] | None:
    """The pieces of a workflow's record, or None when one ``workflow_create`` call holds it."""
    waits = sum(value.count(",") + 1 for name, value in fields if name.startswith("after:") and isinstance(value, str))
    if len(fields) + steps + waits <= PIECE_UNITS and sum(len(v) for _, v in fields) <= PIECE_BYTES:
        return None
    pieces = [Piece(first, min(first + PIECE_UNITS, steps)) for first in range(0, steps, PIECE_UNITS)]
    current = Piece()
    for name, value in fields:
        if current.full():
            pieces.append(current)
            current = Piece()
        current.add(name, value)
        if name.startswith("after:") and isinstance(value, str):
            members = value.split(",")
            for start in range(0, len(members), PIECE_UNITS):
                if current.full():
                    pieces.append(current)
                    current = Piece()
                chunk = members[start : start + PIECE_UNITS]
                current.add("+wait:" + name[len("after:") :], ",".join(chunk), len(chunk))
    pieces.append(current)
    return pieces


def stage(w: WorkflowKeys, piece: Piece) -> ScriptCall[bool]:
    args: list[Any] = [f"stage:{batches.STAGE_TTL_MS}:{piece.first}:{piece.last}"]
    for name, value in piece.fields:
        args += [name, value]
    return ScriptCall("workflow_create", w, args, bool)


def commit(w: WorkflowKeys) -> ScriptCall[int]:
    """1 stored, 0 stored already (a re-send), -1 its staged pieces expired (nothing stored)."""
    return ScriptCall("workflow_create", w, ["commit"], int)


def expired(workflow: str) -> Exception:
    from ..errors import TaskforgeError

    return TaskforgeError(
        f"workflow {workflow}: its record was staged but expired before its commit "
        f"({batches.STAGE_TTL_MS // 1000} s); nothing was stored"
    )
