"""taskforge with one lane per process (``-c 2``): the other worker shape issue #15 measures.

Same app, tasks and producer as ``peers.taskforge`` (``-c 2 -t 8``), same venv;
only the worker command line differs, so the two shapes run side by side in one run.
"""

from peers.taskforge import app, noop, send_noop, send_stamp, stamp

SPEC = {
    "name": "taskforge_t1",
    "venv": "taskforge",
    "requirements": ["{repo}"],
    "distributions": ["taskforge-redis", "redis", "msgpack"],
    "worker": ["{bin}/taskforge", "worker", "peers.taskforge:app", "-c", "{procs}", "--log-level", "warning"],
    "burst": "--burst",
    "enqueue_api": "noop.delay()",
    "bulk": None,
    "no_bulk": "the same delay_many as taskforge's row",
}

__all__ = ["app", "noop", "send_noop", "send_stamp", "stamp"]
