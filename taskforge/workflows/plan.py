"""A composition as numbered steps: what each waits for and what each receives.

A step's input is a *shape*: a step index (that step's result) or a list of
shapes (a group's results, in member order), so a chord receives a list and
a chain ending in a group returns one. Steps are numbered depth-first, which
is the order ``WorkflowInfo.steps`` lists them in.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from .canvas import Chain, Group, Node, Signature

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
    steps: list[Step] = []

    def place(node: Node, after: list[int], given: Shape | None) -> tuple[list[int], Shape]:
        """Number ``node``'s steps; returns the steps that end it, and its result's shape."""
        if isinstance(node, Signature):
            index = len(steps)
            steps.append(Step(node, list(after), None if node.immutable else given))
            for before in after:
                steps[before].next.append(index)
            return [index], index
        if isinstance(node, Chain):
            ends, shape = place(node.items[0], after, given)
            for item in node.items[1:]:
                ends, shape = place(item, ends, shape)
            return ends, shape
        assert isinstance(node, Group)
        ends_all: list[int] = []
        shapes: list[Shape] = []
        for member in node.members:
            ends, shape = place(member, after, given)
            ends_all.extend(ends)
            shapes.append(shape)
        return ends_all, shapes

    _, result = place(root, [], None)
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
