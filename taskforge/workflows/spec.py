"""A step's spec: what a workflow's record keeps to send one of its steps later, typed.

``launch.py`` writes one per step (the record's ``spec:<i>``, msgpack; no
script reads it), and whoever sends the step (a worker's report, the
reconciler, a resume) or shows it (``WorkflowHandle.info()``) reads it back
through ``StepSpec.decode``. The encoding is a msgpack map whose keys are the
field names, in this order, with ``summary``, ``headers`` and ``max_worker_losses`` only when set:
workflows stored by an earlier release decode unchanged, and
``tests/workflows/test_step_spec.py`` fails when a field is added to one side
(the class, ``encode`` or ``decode``) only.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, cast

from ..serialization import dumps, loads

if TYPE_CHECKING:
    from .plan import Shape


@dataclass(frozen=True)
class StepSpec:
    """One step, as its workflow's record keeps it."""

    task: str  # the task's name
    queue: str
    priority: int  # a Priority value
    max_attempts: int
    timeout_ms: int | None  # None: no timeout
    limits: str  # the task's limits as the enqueue script stores them ('' when unlimited)
    inherit: bool  # the task is not registered where the workflow was built: the worker's definition decides
    call: bytes  # the step's own (args, kwargs), as ``dumps_call`` made them
    input: Shape | None  # what it receives before its own args (``plan.py``); None: nothing
    summary: bool = False  # an on_failure step built with .s(): the failed step's summary comes first
    headers: dict[str, str] | None = None  # the workflow's start's headers (producer hooks); None: none
    max_worker_losses: int = 2  # the task's budget of lost workers (``@app.task(max_worker_losses=...)``)

    def encode(self) -> bytes:
        spec: dict[str, Any] = {
            "task": self.task,
            "queue": self.queue,
            "priority": self.priority,
            "max_attempts": self.max_attempts,
            "timeout_ms": self.timeout_ms,
            "limits": self.limits,
            "inherit": self.inherit,
            "call": self.call,
            "input": self.input,
        }
        if self.summary:
            spec["summary"] = True
        if self.headers:
            spec["headers"] = self.headers
        if self.max_worker_losses != 2:
            spec["max_worker_losses"] = self.max_worker_losses
        return dumps(spec)

    @classmethod
    def decode(cls, raw: bytes) -> StepSpec:
        """The spec ``encode`` wrote; ValueError when ``raw`` is not one (junk in the record)."""
        spec = loads(raw)
        if not isinstance(spec, dict):
            raise ValueError(f"a step's spec is a map, not {type(spec).__name__}")
        try:
            return cls(
                task=_of(spec, "task", str),
                queue=_of(spec, "queue", str),
                priority=_of(spec, "priority", int),
                max_attempts=_of(spec, "max_attempts", int),
                timeout_ms=spec["timeout_ms"] if spec["timeout_ms"] is None else _of(spec, "timeout_ms", int),
                limits=_of(spec, "limits", str),
                inherit=_of(spec, "inherit", bool),
                call=_of(spec, "call", bytes),
                input=cast("Shape | None", spec["input"]),
                summary=bool(spec.get("summary", False)),
                headers=cast("dict[str, str] | None", spec.get("headers")),
                max_worker_losses=_of(spec, "max_worker_losses", int) if "max_worker_losses" in spec else 2,
            )
        except KeyError as exc:
            raise ValueError(f"a step's spec has no {exc.args[0]!r}") from None

    def with_headers(self, headers: dict[str, str]) -> StepSpec:
        return replace(self, headers=dict(headers) or None)


def _of(spec: dict[Any, Any], name: str, kind: type[Any]) -> Any:
    value = spec[name]
    if not isinstance(value, kind):
        raise ValueError(f"a step's spec has {name}={value!r}, not a {kind.__name__}")
    return value
