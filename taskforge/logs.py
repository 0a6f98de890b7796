"""Log lines written while a job runs carry its id and task name.

A task's own ``logging.getLogger(__name__).info(...)`` says nothing about
which job wrote it; with many jobs running at once across children and
lanes, its lines cannot be told apart. ``JobContextFilter`` adds
``job_id`` and ``task`` to every record emitted while a job runs in the
calling thread (read from ``current_job()``, which each lane sets for its
own job), plus ``job``, the two together as ``task[job_id]: `` (empty
outside a job), ready for a format string.

A worker installs it on the handler it configures in each child, unless
``TASKFORGE_LOG_JOB_CONTEXT=0`` is set. An app that configures logging
itself adds the filter to its own handlers (see docs/logging.md).

This module belongs with the operator tools: the API never imports it,
and it imports nothing of the worker.
"""

from __future__ import annotations

import logging
import os
import sys

from .context import current_job
from .errors import TaskforgeError
from .printable import printable

__all__ = ["ENV_VAR", "JobContextFilter", "configure_logging", "job_context_enabled"]

ENV_VAR = "TASKFORGE_LOG_JOB_CONTEXT"
OFF = ("0", "false", "no", "off")


class JobContextFilter(logging.Filter):
    """Adds ``job_id``, ``task`` and ``job`` to each record; lets every record through.

    Fields a caller set already (``extra={"task": ...}``) are left alone.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            job = current_job()
        except TaskforgeError:  # not inside a job
            job_id = task = tag = ""
        else:
            # A task name can hold any character: escaped, it cannot forge a line of the log.
            job_id, task = printable(job.id), printable(job.task)
            tag = f"{task}[{job_id}]: "
        for name, value in (("job_id", job_id), ("task", task), ("job", tag)):
            if not hasattr(record, name):
                setattr(record, name, value)
        return True


def job_context_enabled() -> bool:
    """On unless ``TASKFORGE_LOG_JOB_CONTEXT`` says 0, false, no or off."""
    return os.environ.get(ENV_VAR, "1").strip().lower() not in OFF


def configure_logging(level: str, who: str, job_context: bool | None = None) -> None:
    """Log to stderr as a worker process does: time, level, ``[who]``, and the job when one runs.

    ``job_context`` None follows ``TASKFORGE_LOG_JOB_CONTEXT``.
    """
    with_job = job_context_enabled() if job_context is None else job_context
    job = "%(job)s" if with_job else ""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(f"%(asctime)s %(levelname)s [{who}] {job}%(message)s"))
    if with_job:
        handler.addFilter(JobContextFilter())
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(level.upper())
