"""Forgetting a queue for good: ``taskforge queues forget APP QUEUE``, as a library call.

Queue names are remembered (``taskforge:queues``) so that ``status``, the
dashboard and ``purge`` see every queue ever used; one-off queues would
pile up there forever. Forgetting an empty queue deletes every key it has
(finished jobs' records, stats, its sequence...) and its name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .broker.keys import validate_queue_name

if TYPE_CHECKING:
    from .app import TaskForge


def forget_queue(app: TaskForge, queue: str) -> int:
    """Delete every key of ``queue`` and its name; how many keys went.

    Raises ``QueueNotEmpty`` when a job waits, runs or is dead there (purge it
    first), ``ConfigurationError`` for a name no queue can have. A queue of the
    app's own tasks is still listed by ``status`` (the app names it), empty.
    """
    return app.broker.cleanup.forget(validate_queue_name(queue))
