"""After a final transition: the one seam through which a job's end reaches whoever else must know.

A job's final transition (it succeeded, it died, it was cancelled or
aborted) is recorded by one Lua script, which also leaves, for a workflow's
step, a report in its queue's outbox (crash-safe: same script, same slot).
Right after, whoever made the transition tells the app's ``finals``, and
its listeners act on it: workflows carry the step's report to its workflow
and send what may go next (``workflows/reports.py``), the way a pipeline is
one middleware on one hook elsewhere. The callers are the worker's runner
(a lane, the event loop, ``app.drain()``), the supervisor settling the
jobs of a child that died, and ``JobHandle.cancel()``/``abort()`` on the
producer's side. Nothing else calls workflow code after a transition.

A listener is told of every job, or (``steps_only``) only of the jobs that
are steps of a workflow, so a plain job in a worker pays one check (``if
claim.workflow or finals.every``) and nothing more: no loop, no object.
A listener is best effort, as a hook is: what it raises is logged and
changes nothing for the job, whose outcome is recorded already; what it
left undone, the outbox keeps for the reconciler.

The user's hooks (``@app.on("job_succeeded")``...) are not listeners: they
run where they always ran, right after this seam, with the ``JobInfo``
users see.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from .broker.aio_roles import AsyncBrokerRoles
    from .broker.roles import BrokerRoles

log = logging.getLogger("taskforge.finals")


@dataclass(frozen=True, slots=True)
class FinalTransition:
    """A job's final transition, as its queue recorded it.

    ``workflow`` is the workflow the job is a step of ('' for none) when the
    caller has the outcome in hand (the runner: ``result`` and ``error``);
    None when it knows only the id (a cancel, an abort, a child's death the
    supervisor settled): a listener reads what it needs from the job's record.
    """

    queue: str
    job_id: str
    state: str  # succeeded, dead or cancelled (an abort ends cancelled)
    workflow: str | None = None
    result: bytes = b""  # msgpack, when it succeeded
    error: str = ""  # why it ended, when it did not succeed
    busy: bool = False  # the lane that recorded it already holds its next job: a listener may batch


class FinalListener(Protocol):
    """What ``Finals.listen`` takes: told after each final transition, in the process that made it."""

    def ended(self, broker: BrokerRoles, transition: FinalTransition) -> None: ...

    async def aended(self, broker: AsyncBrokerRoles, transition: FinalTransition) -> None: ...


class Finals:
    """An app's listeners to final transitions (``app.finals``), by name, in registration order."""

    def __init__(self) -> None:
        self._named: dict[str, tuple[FinalListener, bool]] = {}
        self.every: tuple[FinalListener, ...] = ()  # told of every job: empty, a plain job is told nothing
        self.steps: tuple[FinalListener, ...] = ()  # told of a workflow's steps: every listener

    def listen(self, name: str, listener: FinalListener, *, steps_only: bool = False) -> None:
        """Register ``listener`` under ``name`` (a listener of that name is replaced)."""
        self._named[name] = (listener, steps_only)
        self.every = tuple(each for each, only in self._named.values() if not only)
        self.steps = tuple(each for each, _ in self._named.values())

    def replaced(self, name: str, listener: FinalListener) -> Finals:
        """A copy with ``listener`` in place of the one named ``name`` (a worker child's courier)."""
        copy = Finals()
        for each, (old, steps_only) in self._named.items():
            copy.listen(each, listener if each == name else old, steps_only=steps_only)
        if name not in self._named:
            copy.listen(name, listener)
        return copy

    def _for(self, transition: FinalTransition) -> tuple[FinalListener, ...]:
        return self.every if transition.workflow == "" else self.steps

    def ended(self, broker: BrokerRoles, transition: FinalTransition) -> None:
        """Tell the listeners; none of them can fail the caller."""
        for listener in self._for(transition):
            try:
                listener.ended(broker, transition)
            except Exception:
                log.exception("a listener of %s's final transition raised; the job is not affected", transition.job_id)

    async def aended(self, broker: AsyncBrokerRoles, transition: FinalTransition) -> None:
        """``ended()``, awaited (``JobHandle.acancel()``, ``aabort()``)."""
        for listener in self._for(transition):
            try:
                await listener.aended(broker, transition)
            except Exception:
                log.exception("a listener of %s's final transition raised; the job is not affected", transition.job_id)
