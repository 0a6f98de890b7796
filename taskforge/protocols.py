"""What the producer side needs of an app, as small protocols rather than the whole ``TaskForge``.

A ``Task`` queues jobs and a ``JobHandle`` reads one back; neither runs a
job, so neither should reach the worker, the registry of other tasks or the
hooks. Typing them against these protocols keeps that visible: anything
with a broker and these few settings can produce jobs (an app, a test
double, a workflow's step sender to come).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from .broker.roles import BrokerRoles
    from .finals import Finals
    from .handle import JobHandle
    from .sending import SendHook
    from .zones import AppZone


class BrokerAccess(Protocol):
    """What a ``JobHandle`` uses: the broker, where a job known only by its id lives, and who
    hears of a job it cancels or aborts (``finals.py``)."""

    @property
    def broker(self) -> BrokerRoles: ...

    @property
    def finals(self) -> Finals: ...

    def queues(self) -> list[str]:
        """Where a job known only by its id is looked for first (then every queue Redis knows)."""
        ...


class Producer(BrokerAccess, Protocol):
    """What a ``Task`` uses: the broker, the limits a new job must respect, and who to tell once it is stored."""

    @property
    def max_size(self) -> int: ...

    @property
    def max_job_size(self) -> int: ...

    @property
    def send_hooks(self) -> Sequence[SendHook]: ...

    @property
    def zone(self) -> AppZone:
        """Where a naive ``apply_at()`` time is read (``zones.py``)."""
        ...

    @property
    def after_enqueue(self) -> Sequence[Callable[[JobHandle[Any]], object]]:
        """Who to tell once a job is stored (``sending.announce``)."""
        ...
