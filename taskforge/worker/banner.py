"""What a worker says when it starts: the few facts an operator checks first.

A newcomer's first question is "is it running what I think, where I think":
which version, which Redis (the password never shown), which queues and
tasks, how many jobs at once, and how it will stop. Celery answers it with
a banner; so does this, logged once at INFO by the supervisor. Its first
line keeps the words of the old one-line form (``children on queues``),
which scripts watching a worker's log wait for.
"""

from __future__ import annotations

import inspect
import os
from typing import TYPE_CHECKING

from .. import __version__
from ..broker.connection import redact
from .leases import renew_every
from .options import WorkerOptions

if TYPE_CHECKING:
    from ..app import TaskForge


def plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def banner(app: TaskForge, app_spec: str, worker_id: str, options: WorkerOptions) -> str:
    """The startup banner, one line per fact, the tasks last."""
    opts = options
    at_once = opts.concurrency * opts.threads
    lines = [
        f"taskforge {__version__} worker {worker_id} (pid {os.getpid()}) starts its children on queues "
        f"{', '.join(opts.queues)}",
        f"  app:        {app.name} ({app_spec})",
        f"  broker:     {redact(app.url)}",
        f"  queues:     {', '.join(opts.queues)}",
        f"  children:   {opts.concurrency} (-c), {plural(opts.threads, 'lane')} each (-t): "
        f"{plural(at_once, 'job')} at once",
        f"  grace:      {opts.grace:g} s on SIGTERM/SIGINT; SIGHUP: warm restart of the children",
        f"  visibility: {opts.visibility_timeout:g} s, leases renewed every {renew_every(opts.visibility_timeout):g} s",
        f"  periodic:   {periodic(app, opts)}",
    ]
    if any(inspect.iscoroutinefunction(task.func) for task in app.tasks.values()):
        lines.append(f"  async:      {plural(opts.async_slots, 'job')} per child, on an event loop (--async)")
    if opts.burst:
        lines.append("  burst:      on (exits once no job is ready)")
    if opts.max_jobs_per_child:
        lines.append(f"  recycle:    each child after {plural(opts.max_jobs_per_child, 'job')}")
    if opts.max_memory_per_child:
        lines.append(f"  memory:     a child past {opts.max_memory_per_child} MB resident is replaced")
    lines.append(f"  tasks ({len(app.tasks)}):")
    served = set(opts.queues)
    for name, task in sorted(app.tasks.items()):
        elsewhere = "" if task.queue in served else " (not served here)"
        lines.append(f"    . {name} [{task.queue}]{elsewhere}")
    return "\n".join(lines)


def periodic(app: TaskForge, options: WorkerOptions) -> str:
    if not options.periodic:
        return "off (--no-periodic)"
    if not app.schedules:
        return "on (the app has no periodic task)"
    return f"on ({plural(len(app.schedules), 'schedule')})"
