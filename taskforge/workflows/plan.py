"""A composition as numbered steps: what each waits for and what each receives.

A step's input is a *shape*: a step index (that step's result) or a list of
shapes (a group's results, in member order), so a chord receives a list and
a chain ending in a group returns one. Steps are numbered depth-first, which
is the order ``WorkflowInfo.steps`` lists them in.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeAlias

if TYPE_CHECKING:  # canvas imports this module: each of its nodes places its own steps
    from .canvas import Node, Signature

Shape: TypeAlias = "int | list[Shape]"


@dataclass
class Step:
    signature: Signature[Any]
    after: list[int]  # the steps that must succeed first
    input: Shape | None  # what it receives before its own args; None: nothing
    next: list[int] = field(default_factory=list)  # the steps that wait for this one


@dataclass
class Plan:
    steps: list[Step]
    result: Shape  # the workflow's result


def make_plan(root: Node) -> Plan:
    """Number ``root``'s steps depth-first; each node places its own (``canvas.py``'s ``place``)."""
    steps: list[Step] = []
    _, result = root.place(steps, [], None)
    return Plan(steps, result)


def leaves(shape: Shape) -> Iterator[int]:
    """The step indices a shape refers to, in order."""
    if isinstance(shape, int):
        yield shape
    else:
        for part in shape:
            yield from leaves(part)


def fill(shape: Shape, values: Iterator[Any]) -> Any:
    """The value of ``shape``, taking the results of its leaves from ``values`` in order."""
    if isinstance(shape, int):
        return next(values)
    return [fill(part, values) for part in shape]
