"""What users compose: ``task.s(...)``, ``chain(...)``, ``group(...)``, ``chord(...)``, and ``a | b``.

Plain values until ``delay()``: building a workflow touches no Redis, so a
composition can be built once and sent many times. Celery's spellings that
mean the same thing work (``a.s() | b.s()``, ``chord(header)(body)``); those
taskforge has no equivalent for raise a ``TypeError`` naming its way.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, NoReturn, TypeVar, Union

from ..errors import ConfigurationError
from .plan import Shape, Step

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

    def delay(self, *partial_args: NoReturn, **partial_kwargs: NoReturn) -> JobHandle[R]:
        """Send this call alone, as a plain job (not a workflow).

        A signature is complete: Celery's partial call (``add.s(2).delay(4)``)
        raises a ``TypeError`` naming the whole call to write instead.
        """
        if partial_args or partial_kwargs:
            raise self._partial("delay", partial_args, partial_kwargs)
        return self.task.delay(*self.args, **self.kwargs)

    async def adelay(self, *partial_args: NoReturn, **partial_kwargs: NoReturn) -> JobHandle[R]:
        """``delay()``, awaited."""
        if partial_args or partial_kwargs:
            raise self._partial("adelay", partial_args, partial_kwargs)
        return await self.task.adelay(*self.args, **self.kwargs)

    def __or__(self, other: Signature[Any] | Chain | Group | Chord) -> Chain:
        """``a.s() | b.s()``: Celery's spelling of ``chain(a.s(), b.s())``."""
        return _pipe(self, other)

    def place(self, steps: list[Step], after: list[int], given: Shape | None) -> tuple[list[int], Shape]:
        """Number this step (``plan.make_plan``): it waits for ``after`` and, unless immutable, receives
        ``given``. Returns the steps that end this node, and the shape of its result."""
        index = len(steps)
        steps.append(Step(self, list(after), None if self.immutable else given))
        for before in after:
            steps[before].next.append(index)
        return [index], index

    # Celery's spellings with no taskforge equivalent: an error that names the way here.

    def _partial(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> TypeError:
        """Celery prepends a partial call's arguments to the signature's; here the whole call is written once."""
        whole = type(self)(self.task, (*args, *self.args), {**self.kwargs, **kwargs}, self.immutable)
        return TypeError(
            f"{self!r}.{method}(...) with arguments is Celery's partial call: a taskforge signature is complete, "
            f"write {whole!r}.{method}() (or {self.task.name.rpartition('.')[2]}.{method}(...) with every argument)"
        )

    def __call__(self, *args: Any, **kwargs: Any) -> NoReturn:
        """Celery's ``sig()`` runs the task here and now: call the task itself for that."""
        name = self.task.name.rpartition(".")[2]
        raise TypeError(
            f"{self!r}() is Celery's spelling: to run it here and now call the task itself, {name}(...); "
            f"to queue it, {self!r}.delay()"
        )

    def set(self, **options: Any) -> NoReturn:
        """Celery's ``sig.set(queue=...)``: a step's options come from its task here."""
        named = ", ".join(f"{k}=..." for k in options) or "queue=..."
        raise TypeError(
            f"{self!r}.set({named}) is Celery's spelling: in taskforge a step's options come from its task, "
            f"write {self.task.name.rpartition('.')[2]}.with_options({named}).{'si' if self.immutable else 's'}(...)"
        )

    def signature(self, *args: Any, **kwargs: Any) -> NoReturn:
        """Celery's ``signature(...)``: a signature is built by ``task.s(...)`` here."""
        raise TypeError(
            f"{self!r}.signature(...) is Celery's spelling: {self!r} already is a signature; build one with "
            "task.s(*args, **kwargs) (task.si(...): immutable), with options through "
            "task.with_options(queue=..., priority=...).s(...)"
        )

    def apply_async(self, *args: Any, **options: Any) -> NoReturn:
        """Celery's ``sig.apply_async(...)``: send a signature alone with ``delay()``."""
        raise TypeError(
            f"{self!r}.apply_async(...) is Celery's spelling: send it alone with .delay() (await .adelay()); "
            "options come from the task: task.with_options(queue=..., priority=...).s(...).delay(), "
            "or task.apply_async(args=..., countdown=...) for a plain job"
        )


Node = Union[Signature[Any], "Chain", "Group"]


def _node(item: object, where: str) -> Node:
    if isinstance(item, (Signature, Chain, Group)):
        return item
    if isinstance(item, Chord):
        return item.as_chain()
    hint = " (a Task: write task.s(...) for a step)" if hasattr(item, "delay") else ""
    raise ConfigurationError(f"{where}: expected task.s(...), chain(...) or group(...), got {item!r}{hint}")


def _pipe(left: Node, right: object) -> Chain:
    """``left | right`` as one flat chain; the ``on_failure`` of either side is the chain's (not both)."""
    other = _node(right, "a | b")
    failures = [node.on_failure for node in (left, other) if not isinstance(node, Signature) and node.on_failure]
    if len(failures) > 1:
        raise ConfigurationError("a | b: both sides have an on_failure; a workflow has one, give it to one side")
    items = [part for node in (left, other) for part in (node.items if isinstance(node, Chain) else (node,))]
    if isinstance(left, Group) and left.on_failure is not None:
        items[0] = Group(left.members)
    if isinstance(other, Group) and other.on_failure is not None:
        items[-1] = Group(other.members)
    return Chain(items, failures[0] if failures else None)


def _not_callable(what: str) -> TypeError:
    return TypeError(
        f"{what}(...)() is Celery's spelling: in taskforge send it with {what}(...).delay() "
        f"(await {what}(...).adelay() in async code), which returns a WorkflowHandle"
    )


def _no_apply_async(what: str) -> TypeError:
    return TypeError(
        f"{what}(...).apply_async(...) is Celery's spelling: in taskforge send it with {what}(...).delay() "
        f"(await {what}(...).adelay() in async code), which returns a WorkflowHandle; a step's options come from "
        "its task: task.with_options(queue=..., priority=...).s(...)"
    )


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

    def __or__(self, other: Signature[Any] | Chain | Group | Chord) -> Chain:
        """``chain(a.s(), b.s()) | c.s()``: one flat chain, ``chain(a.s(), b.s(), c.s())``."""
        return _pipe(self, other)

    def place(self, steps: list[Step], after: list[int], given: Shape | None) -> tuple[list[int], Shape]:
        """Each item after the one before it, receiving its result (``Signature.place``)."""
        ends, shape = self.items[0].place(steps, after, given)
        for item in self.items[1:]:
            ends, shape = item.place(steps, ends, shape)
        return ends, shape

    def __call__(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise _not_callable("chain")

    def apply_async(self, *args: Any, **options: Any) -> NoReturn:
        raise _no_apply_async("chain")

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
        self.members = tuple(_node(m, "group()") for m in members)  # none is fine: its result is []
        if on_failure is not None and not isinstance(on_failure, Signature):
            raise ConfigurationError(f"on_failure: expected task.s(...) or task.si(...), got {on_failure!r}")
        self.on_failure = on_failure

    def __repr__(self) -> str:
        return f"group({', '.join(map(repr, self.members))})"

    def __or__(self, other: Signature[Any] | Chain | Group | Chord) -> Chain:
        """``group(...) | b.s()``: ``chain(group(...), b.s())``, b gets the list of the members' results."""
        return _pipe(self, other)

    def place(self, steps: list[Step], after: list[int], given: Shape | None) -> tuple[list[int], Shape]:
        """Every member side by side; the result is the list of theirs (``Signature.place``).

        A group of no member ends where it began: what follows it waits for
        ``after`` as it would have waited for the members, and receives ``[]``.
        """
        if not self.members:
            return list(after), []
        ends_all: list[int] = []
        shapes: list[Shape] = []
        for member in self.members:
            ends, shape = member.place(steps, after, given)
            ends_all.extend(ends)
            shapes.append(shape)
        return ends_all, shapes

    def __call__(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise _not_callable("group")

    def apply_async(self, *args: Any, **options: Any) -> NoReturn:
        raise _no_apply_async("group")

    def delay(self) -> WorkflowHandle[list[Any]]:
        from .launch import launch

        return launch(self, self.on_failure)

    async def adelay(self) -> WorkflowHandle[list[Any]]:
        """``delay()``, awaited: never blocks the event loop."""
        from .aio_launch import alaunch

        return await alaunch(self, self.on_failure)


class Chord:
    """Celery's ``chord``: a group whose members' results, as a list, go to one step (its body).

    ``chord(header)(body)`` sends ``chain(group(*header), body)`` at once and
    returns its ``WorkflowHandle``; ``chord(header, body)`` is that workflow
    not sent yet: ``.delay()``, ``.adelay()`` or ``()`` send it, and it may be
    a part of a chain or a group like any step.
    """

    def __init__(
        self,
        header: Iterable[object] | Group,
        body: Signature[Any] | Chain | Group | None = None,
        on_failure: Signature[Any] | None = None,
    ) -> None:
        self.header = header if isinstance(header, Group) else Group(header)
        self.body = None if body is None else _node(body, "chord() body")
        self.on_failure = on_failure
        if on_failure is not None and not isinstance(on_failure, Signature):
            raise ConfigurationError(f"on_failure: expected task.s(...) or task.si(...), got {on_failure!r}")

    def __repr__(self) -> str:
        members = ", ".join(map(repr, self.header.members))
        return f"chord([{members}]{'' if self.body is None else f', {self.body!r}'})"

    def as_chain(self) -> Chain:
        """The workflow it stands for: ``chain(group(*header), body)``."""
        if self.body is None:
            raise ConfigurationError(f"{self!r} has no body: write chord(header)(body) or chord(header, body)")
        return Chain([self.header, self.body], self.on_failure)

    def __call__(self, body: Signature[Any] | Chain | Group | None = None) -> WorkflowHandle[Any]:
        """``chord(header)(body)``, or ``chord(header, body)()``: send it; a ``WorkflowHandle``."""
        if body is not None and self.body is not None:
            raise ConfigurationError(f"{self!r} has a body already: call it with no argument, or use .delay()")
        return (self if body is None else Chord(self.header, body, self.on_failure)).delay()

    def delay(self) -> WorkflowHandle[Any]:
        """Store the workflow and send its header's members; the body runs once they all succeeded."""
        return self.as_chain().delay()

    def apply_async(self, *args: Any, **options: Any) -> NoReturn:
        raise _no_apply_async("chord")

    async def adelay(self) -> WorkflowHandle[Any]:
        """``delay()``, awaited."""
        return await self.as_chain().adelay()

    def __or__(self, other: Signature[Any] | Chain | Group | Chord) -> Chain:
        """``chord(header, body) | c.s()``: c gets the body's result."""
        return _pipe(self.as_chain(), other)


def chain(*items: Signature[Any] | Chain | Group | Chord, on_failure: Signature[Any] | None = None) -> Chain:
    """``chain(a.s(), b.s(), c.s())``: b receives a's result, c receives b's."""
    return Chain(items, on_failure)


def group(
    *members: Signature[Any] | Chain | Group | Chord | Iterable[Signature[Any] | Chain | Group | Chord],
    on_failure: Signature[Any] | None = None,
) -> Group:
    """``group(a.s(), b.s())`` or ``group(a.s(p) for p in ps)``: members run side by side."""
    if len(members) == 1 and not isinstance(members[0], (Signature, Chain, Group, Chord)):
        return Group(members[0], on_failure)
    return Group(members, on_failure)


def chord(
    header: Iterable[Signature[Any] | Chain | Group | Chord] | Group,
    body: Signature[Any] | Chain | Group | None = None,
    *,
    on_failure: Signature[Any] | None = None,
) -> Chord:
    """Celery's ``chord``: ``chord(header)(body)`` == ``chain(group(*header), body).delay()``.

    ``chord(header, body)`` is the same workflow not sent yet (``.delay()``,
    ``.adelay()`` or ``()`` send it).
    """
    return Chord(header, body, on_failure)
