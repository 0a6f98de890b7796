"""Testing kit: run jobs in the test's own process, and a pytest plugin.

``app.drain()`` takes every ready job of the app's queues and runs it right
here, through the same runner a worker uses (hooks, middleware, retries,
dead letters, results), then returns the ``JobInfo`` of each run, in order.

The pytest plugin (entry point ``pytest11``) adds one fixture::

    def test_signup(taskforge_app):
        app = taskforge_app(myapp.app)      # myapp.app now talks to a fresh memory:// broker
        myapp.send_welcome.delay("a@b.c")
        [job] = app.drain()
        assert job.state == "succeeded"

``taskforge_app()`` with no argument gives a new empty app on ``memory://``.
The app's real broker is restored after the test.

Eager mode (``taskforge_app(app, eager=True)``, or ``set_eager(app, True)``):
every ``delay()`` drains the queue before it returns, so code under test sees
results at once. It is an after-enqueue callback (``app.after_enqueue``) from
``taskforge.inprocess``, installed by switching it on and removed by switching
it off (``is_eager(app)`` tells which). Caveats: jobs run in the
caller's process and thread, depth-first when tasks enqueue tasks; no
timeouts are enforced; a failing job stays ``retrying`` until a later drain
with ``advance`` (its exception is recorded, not raised); scheduled jobs do
not run until their time (or ``advance``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import pytest

from .broker import Broker
from .inprocess import drain, is_eager, set_eager

if TYPE_CHECKING:
    from .app import TaskForge

__all__ = ["drain", "is_eager", "set_eager", "taskforge_app"]


@pytest.fixture
def taskforge_app() -> Iterator[Callable[..., TaskForge]]:
    """A factory: ``taskforge_app(app=None)`` -> the app, bound to a fresh memory:// broker."""
    from .app import TaskForge
    from .broker.connection import connect

    swapped: list[tuple[TaskForge, Broker | None, bool]] = []

    def make(app: TaskForge | None = None, *, eager: bool = False) -> TaskForge:
        target = app if app is not None else TaskForge("test", broker="memory://")
        memory = Broker(
            connect("memory://"), "memory://", int(target.retention * 1000), int(target.dead_retention * 1000)
        )
        swapped.append((target, use_broker(target, memory), is_eager(target)))
        set_eager(target, eager)
        return target

    yield make
    for target, broker, eager in reversed(swapped):
        use_broker(target, broker)
        set_eager(target, eager)


def use_broker(app: TaskForge, broker: Broker | None) -> Broker | None:
    """Make ``app`` talk through ``broker`` from now on (None: connect to its URL again on next use).

    Returns the broker the app had, so a caller that swaps it (the fixture's
    ``memory://`` broker) can put it back. A function of the testing kit
    rather than a method, which keeps the app's facade small.
    """
    previous, app._broker = app._broker, broker
    app._async_brokers.clear()  # the next a-call follows the new broker (memory:// shares its server)
    return previous
