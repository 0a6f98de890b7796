"""``taskforge worker APP``."""

from __future__ import annotations

import logging
import os
import signal
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

from ..app import TaskForge
from ..broker.keys import validate_queue_name
from ..errors import AppNotFound
from ..loader import import_included
from ..worker.forkserver import ForkServer
from ..worker.supervisor import Supervisor, WorkerOptions
from .common import USAGE, cli_errors, fail, open_app, refuse_memory

if TYPE_CHECKING:
    from ..metrics import WorkerMetrics

LOG_LEVELS = ["debug", "info", "warning", "error"]
GRACE_HELP = "Seconds running jobs get to finish on SIGTERM/SIGINT."
F = TypeVar("F", bound=Callable[..., Any])
MAX_MEMORY_MB = 1 << 30  # a petabyte: any more is a typo, not a limit


def _defaulted(*decls: str, kind: click.ParamType[Any], default: float, help: str) -> Callable[[F], F]:
    """An option with a shown default: the worker's numbers say what they are when omitted."""
    return click.option(*decls, type=kind, default=default, show_default=True, help=help)


def _stop_before_start(_signum: int, _frame: object) -> None:
    """SIGTERM or Ctrl-C while the app is still loading: nothing is claimed or started yet."""
    raise SystemExit(0)


def _celery_app_option(_ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    """Celery's ``-A proj``: taskforge takes the app as the worker's first argument."""
    if value is not None:
        raise click.UsageError(f"-A is Celery's; name the app first: taskforge worker {value}:app (module:attribute)")


@click.command()
@click.option("-A", "--app", "celery_app", hidden=True, is_eager=True, expose_value=False, callback=_celery_app_option)
@click.argument("app")
@click.option(
    "-c", "--concurrency", type=click.IntRange(min=1), default=None, help="Child processes (default: CPU count)."
)
@_defaulted(
    "-t",
    "--threads",
    kind=click.IntRange(min=1, max=256),
    default=1,
    help="Threads per child, each running one job at a time: more jobs in flight for I/O-bound tasks.",
)
@_defaulted(
    "--async",
    "async_slots",
    kind=click.IntRange(min=1, max=10_000),
    default=100,
    help="Jobs of async def tasks each child runs at once on its event loop (beside the -t threads).",
)
@click.option(
    "-q",
    "--queue",
    "queues",
    multiple=True,
    help="Queue to serve; repeat for several (default: every queue of the app's tasks).",
)
@click.option("--burst", is_flag=True, help="Exit once no job is ready.")
@_defaulted(
    "--visibility-timeout",
    kind=click.FloatRange(min=0.5),
    default=60.0,
    help="Seconds a claim lasts unless renewed; the supervisor renews every third of it.",
)
@_defaulted("--grace", kind=click.FloatRange(min=0), default=30.0, help=GRACE_HELP)
@click.option(
    "-l",
    "--log-level",
    type=click.Choice(LOG_LEVELS, case_sensitive=False),
    default="info",
    show_default=True,
    help="What the worker logs; -l as in Celery's `-l info`.",
)
@_defaulted(
    "--max-jobs-per-child",
    kind=click.IntRange(min=0),
    default=0,
    help="Replace a child after this many jobs (0: never), for memory hygiene.",
)
@_defaulted(
    "--max-memory-per-child",
    kind=click.IntRange(min=0, max=MAX_MEMORY_MB),
    default=0,
    help="Replace a child once its running jobs end when its resident memory passed this many MB (0: never).",
)
@click.option(
    "--prefetch",
    default="auto",
    show_default=True,
    callback=lambda ctx, param, value: parse_prefetch(value),
    help="Jobs a lane claims at once, 1 to 256, their successes recorded with the next claim; auto: one "
    "while the queue is shallow or runs are long, up to 16 while it is deep and runs are short.",
)
@click.option("--no-periodic", is_flag=True, help="Do not enqueue the app's periodic tasks from this worker.")
@click.option(
    "--metrics-port",
    type=click.IntRange(min=1, max=65535),
    default=None,
    help="Serve Prometheus metrics at http://HOST:PORT/metrics (needs taskforge-redis[metrics]).",
)
@click.option(
    "--metrics-host",
    default="127.0.0.1",
    show_default=True,
    help="Address the metrics endpoint binds to; 0.0.0.0 to let other hosts scrape it.",
)
def worker(
    app: str,
    concurrency: int | None,
    threads: int,
    async_slots: int,
    queues: tuple[str, ...],
    burst: bool,
    visibility_timeout: float,
    grace: float,
    log_level: str,
    max_jobs_per_child: int,
    max_memory_per_child: int,
    prefetch: int,
    no_periodic: bool,
    metrics_port: int | None,
    metrics_host: str,
) -> None:
    """Run jobs: a supervisor and N child processes.

    APP is module:attribute (or module, whose attribute is app), importable
    from the current directory.

    \b
    Example:
      taskforge worker myapp:app -c 4 -q mail -q default
      taskforge worker myapp:app --metrics-port 9100
      taskforge worker myapp:app -c 2 -t 8     # 16 jobs at once, for I/O-bound tasks
      taskforge worker myapp:app -c 1 --async 500   # 500 async def jobs at once
    """
    # Until the supervisor takes the signals over, a stop request finds nothing
    # to hand back: exit 0 at once, as a stopped worker does (not -15).
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, _stop_before_start)
    if hasattr(signal, "SIGHUP"):  # a restart before any child started: they will import the code afresh anyway
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
    logging.basicConfig(
        level=log_level.upper(),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s [supervisor pid %(process)d] %(message)s",
    )
    the_app = open_app(app)
    refuse_memory(the_app, app, "a worker here would never see a job another process sends")
    refuse_taskless(the_app, app)
    try:
        served = tuple(validate_queue_name(q) for q in queues) or tuple(the_app.queues())
    except Exception as exc:
        fail(str(exc), USAGE)
    options = WorkerOptions(
        concurrency=concurrency or os.cpu_count() or 1,
        queues=served,
        visibility_timeout=visibility_timeout,
        grace=grace,
        burst=burst,
        max_jobs_per_child=max_jobs_per_child,
        max_memory_per_child=max_memory_per_child,
        log_level=log_level,
        periodic=not no_periodic,
        threads=threads,
        async_slots=async_slots,
        prefetch=prefetch,
    )
    # Now, with the app imported and before any connection or thread exists: children forked
    # from this pristine copy import nothing (``worker/forkserver.py``); None where they are spawned.
    forks = ForkServer.start()
    with cli_errors():
        the_app.broker.ping()
        metrics = serve_metrics(the_app, served, metrics_host, metrics_port) if metrics_port else None
        try:
            code = Supervisor(the_app, app, options, metrics, forks).run()
        finally:
            if metrics is not None:
                metrics.close()
    sys.exit(code)


PREFETCH_MAX = 256


def parse_prefetch(value: str) -> int:
    """``--prefetch``: ``auto`` (0) or a whole number from 1 to PREFETCH_MAX."""
    if value.strip().lower() == "auto":
        return 0
    try:
        number = int(value)
    except ValueError:
        number = 0
    if not 1 <= number <= PREFETCH_MAX:
        raise click.BadParameter(f"{value!r}: give a whole number from 1 to {PREFETCH_MAX}, or auto")
    return number


def refuse_taskless(app: TaskForge, spec: str) -> None:
    """Import the app's ``include=`` modules; exit 2 when one fails, or when the app still has no task.

    A worker with no task would dead-letter every job it claims as unknown.
    """
    try:
        import_included(app)
    except AppNotFound as exc:
        if exc.details:
            click.echo(exc.details.rstrip(), err=True)
        fail(str(exc), USAGE)
    if not app.tasks:
        fail(
            f"app {app.name!r} ({spec}) has no task, so a worker would run nothing: define tasks in the "
            "module APP names, or name the modules that define them with include=, "
            f"TaskForge({app.name!r}, include=['module.with.tasks'])",
            USAGE,
        )


def serve_metrics(app: TaskForge, queues: tuple[str, ...], host: str, port: int) -> WorkerMetrics:
    from ..metrics import WorkerMetrics

    metrics = WorkerMetrics(app, queues)
    metrics.serve(host, port)
    logging.getLogger("taskforge.worker").info("metrics at http://%s:%d/metrics", host, port)
    return metrics
