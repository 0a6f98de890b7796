"""What users compose: ``task.s(...)``, ``chain(...)``, ``group(...)``.

Plain values until ``delay()``: building a workflow touches no Redis, so a
composition can be built once and sent many times.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar, Union

from ..errors import ConfigurationError

if TYPE_CHECKING:
    from ..handle import JobHandle
    from ..task import Task
    from .handle import WorkflowHandle

R = TypeVar("R")


@dataclass(frozen=True)
class Signature(Generic[R]):
    """A call of a task not yet sent. In a chain, the previous step's result comes first in its args
    unless it is ``immutable`` (``task.si(...)``)."""

    task: Task[Any, R]
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    immutable: bool = False

    def __repr__(self) -> str:
        call = ", ".join([*map(repr, self.args), *(f"{k}={v!r}" for k, v in self.kwargs.items())])
        return f"{self.task.name}.{'si' if self.immutable else 's'}({call})"

    def delay(self) -> JobHandle[R]:
        """Send this call alone, as a plain job (not a workflow)."""
        return self.task.delay(*self.args, **self.kwargs)

    async def adelay(self) -> JobHandle[R]:
        """``delay()``, awaited."""
        return await self.task.adelay(*self.args, **self.kwargs)


Node = Union[Signature[Any], "Chain", "Group"]


def _node(item: object, where: str) -> Node:
    if isinstance(item, (Signature, Chain, Group)):
        return item
    hint = " (a Task: write task.s(...) for a step)" if hasattr(item, "delay") else ""
    raise ConfigurationError(f"{where}: expected task.s(...), chain(...) or group(...), got {item!r}{hint}")


class Chain:
    """Steps one after another: each starts once the one before it succeeded."""

    items: tuple[Node, ...]
    on_failure: Signature[Any] | None

    def __init__(self, items: Iterable[object], on_failure: Signature[Any] | None = None) -> None:
        flat: list[Node] = []
        for item in items:
            node = _node(item, "chain()")
            if isinstance(node, Chain):
                if node.on_failure is not None:
                    raise ConfigurationError("chain(): on_failure belongs to the outermost chain only")
                flat.extend(node.items)
            else:
                flat.append(node)
        if not flat:
            raise ConfigurationError("chain() needs at least one step")
        if on_failure is not None and not isinstance(on_failure, Signature):
            raise ConfigurationError(f"on_failure: expected task.s(...) or task.si(...), got {on_failure!r}")
        self.items = tuple(flat)
        self.on_failure = on_failure

    def __repr__(self) -> str:
        return f"chain({', '.join(map(repr, self.items))})"

    def delay(self) -> WorkflowHandle[Any]:
        """Store the workflow and send its first steps; nothing is stored if an argument cannot travel."""
        from .launch import launch

        return launch(self, self.on_failure)

    async def adelay(self) -> WorkflowHandle[Any]:
        """``delay()``, awaited: never blocks the event loop."""
        from .aio_launch import alaunch

        return await alaunch(self, self.on_failure)


class Group:
    """Steps side by side; their results, in member order, are the group's result."""

    def __init__(self, members: Iterable[object], on_failure: Signature[Any] | None = None) -> None:
        self.members = tuple(_node(m, "group()") for m in members)
        if not self.members:
            raise ConfigurationError("group() needs at least one member")
        if on_failure is not None and not isinstance(on_failure, Signature):
            raise ConfigurationError(f"on_failure: expected task.s(...) or task.si(...), got {on_failure!r}")
        self.on_failure = on_failure

    def __repr__(self) -> str:
        return f"group({', '.join(map(repr, self.members))})"

    def delay(self) -> WorkflowHandle[list[Any]]:
        from .launch import launch

        return launch(self, self.on_failure)

    async def adelay(self) -> WorkflowHandle[list[Any]]:
        """``delay()``, awaited: never blocks the event loop."""
        from .aio_launch import alaunch

        return await alaunch(self, self.on_failure)


def chain(*items: Signature[Any] | Chain | Group, on_failure: Signature[Any] | None = None) -> Chain:
    """``chain(a.s(), b.s(), c.s())``: b receives a's result, c receives b's."""
    return Chain(items, on_failure)


def group(
    *members: Signature[Any] | Chain | Group | Iterable[Signature[Any] | Chain | Group],
    on_failure: Signature[Any] | None = None,
) -> Group:
    """``group(a.s(), b.s())`` or ``group(a.s(p) for p in ps)``: members run side by side."""
    if len(members) == 1 and not isinstance(members[0], (Signature, Chain, Group)):
        return Group(members[0], on_failure)
    return Group(members, on_failure)
