"""Prometheus metrics of one worker, served by its supervisor (``taskforge worker --metrics-port``).

Children already tell their supervisor over a pipe which job they start; with
metrics on, they also say how each run ended and how long it took. So every
counter lives in the supervisor's one process: no multiprocess file
directory, no counts lost when a child is replaced, and no Redis call per
job. Queue depths and live workers are read from Redis when Prometheus
scrapes, a handful of calls per queue whatever its size.

Metrics (the ``job`` counters are labelled by ``queue`` and ``task``; a task
the app did not register is labelled ``unknown``, so job names a producer
made up cannot add series without bound):

    taskforge_jobs_started_total      runs handed to a child
    taskforge_jobs_succeeded_total    runs that returned
    taskforge_jobs_failed_total       runs that raised, crashed or timed out (retried or dead)
    taskforge_jobs_retried_total      failed runs that will be tried again
    taskforge_jobs_dead_total         failed runs that moved their job to the dead-letter set
    taskforge_job_duration_seconds    histogram of run time, by queue, task and outcome
    taskforge_lease_reclaims_total    jobs this worker took back from a lost worker, by queue
    taskforge_child_restarts_total    children replaced, by reason (crashed, killed, recycled)
    taskforge_loop_blocked_total      times a child's event loop was blocked over a second, by the job
                                      blocking it (queue and task; blank when no job's code held it)
    taskforge_queue_jobs              jobs in each state, by queue and state (read at scrape time)
    taskforge_jobs_expired_last_hour  jobs that reached their expires time unrun in the last hour, by queue
    taskforge_workers_alive           workers with a fresh heartbeat on this Redis
    taskforge_broker_up               1 if the scrape could read Redis, else 0
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import redis

from .errors import ConfigurationError, MetricsPortUnavailable, TaskforgeError

if TYPE_CHECKING:
    from .app import TaskForge

log = logging.getLogger("taskforge.metrics")

DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, float("inf"))
QUEUE_STATES = ("pending", "scheduled", "retrying", "deferred", "running", "dead")
UNKNOWN_TASK = "unknown"


def _prometheus() -> Any:
    try:
        import prometheus_client
    except ImportError as exc:
        raise ConfigurationError(
            "--metrics-port needs the prometheus-client library: pip install 'taskforge-redis[metrics]'"
        ) from exc
    return prometheus_client


class QueueCollector:
    """Queue depths and live workers, read from Redis at scrape time."""

    def __init__(self, app: TaskForge, queues: Sequence[str]) -> None:
        self.app = app
        self.queues = list(queues)

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        from . import status as tf_status

        depth = GaugeMetricFamily("taskforge_queue_jobs", "Jobs in each state, by queue.", labels=["queue", "state"])
        expired = GaugeMetricFamily(
            "taskforge_jobs_expired_last_hour",
            "Jobs that reached their expires time unrun, last 60 minutes.",
            labels=["queue"],
        )
        alive = GaugeMetricFamily("taskforge_workers_alive", "Workers with a fresh heartbeat on this Redis.")
        up = GaugeMetricFamily("taskforge_broker_up", "1 if this scrape could read Redis.")
        try:
            for name in self.queues:
                counts = tf_status.queue_status(self.app, name).to_dict()
                for state in QUEUE_STATES:
                    depth.add_metric([name, state], counts[state])
                expired.add_metric([name], counts["expired_last_hour"])
            alive.add_metric([], len(tf_status.workers(self.app)))
        except (TaskforgeError, redis.RedisError) as exc:
            log.warning("metrics scrape could not read Redis: %s", exc)
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield from (depth, expired, alive, up)


class WorkerMetrics:
    """The counters of one worker, in a registry of its own (two workers in one process never mix)."""

    def __init__(self, app: TaskForge, queues: Sequence[str]) -> None:
        prom = _prometheus()
        self.app = app
        self.registry = prom.CollectorRegistry()
        job_labels = ["queue", "task"]

        def counter(name: str, doc: str, labels: list[str] = job_labels) -> Any:
            return prom.Counter(name, doc, labels, registry=self.registry)

        self.started_total = counter("taskforge_jobs_started", "Runs handed to a child.")
        self.succeeded_total = counter("taskforge_jobs_succeeded", "Runs that returned.")
        self.failed_total = counter("taskforge_jobs_failed", "Runs that raised, crashed or timed out.")
        self.retried_total = counter("taskforge_jobs_retried", "Failed runs that will be tried again.")
        self.dead_total = counter("taskforge_jobs_dead", "Failed runs that moved their job to the dead-letter set.")
        self.reclaims_total = counter("taskforge_lease_reclaims", "Jobs taken back from a lost worker.", ["queue"])
        self.restarts_total = counter("taskforge_child_restarts", "Child processes replaced.", ["reason"])
        self.loop_blocked_total = counter(
            "taskforge_loop_blocked", "Times a child's event loop was blocked over a second, by the job blocking it."
        )
        self.duration = prom.Histogram(
            "taskforge_job_duration_seconds",
            "Run time of a job, by outcome.",
            ["queue", "task", "outcome"],
            buckets=DURATION_BUCKETS,
            registry=self.registry,
        )
        self.registry.register(QueueCollector(app, queues))
        self.server: Any = None

    def task_label(self, task: str) -> str:
        """The task's own name when the app registered it, else ``unknown``.

        Every job name a worker meets would otherwise be a label: ~25 series per
        name (counters and a histogram), kept until the worker stops, on every
        worker that meets it (issue 47: 2,000 names made a 5 MB ``/metrics``).
        The blank task of a loop blocked outside any job stays blank.
        """
        return task if not task or task in self.app.tasks else UNKNOWN_TASK

    def started(self, queue: str, task: str) -> None:
        self.started_total.labels(queue, self.task_label(task)).inc()

    def finished(self, queue: str, task: str, state: str | None, seconds: float) -> None:
        """One run's outcome as the queue recorded it; fenced or unrecorded runs count only their time."""
        task = self.task_label(task)
        if state == "succeeded":
            self.succeeded_total.labels(queue, task).inc()
        elif state in ("retrying", "dead"):
            self.failed_total.labels(queue, task).inc()
            (self.retried_total if state == "retrying" else self.dead_total).labels(queue, task).inc()
        self.duration.labels(queue, task, state or "unrecorded").observe(max(0.0, seconds))

    def reclaimed(self, queue: str, count: int) -> None:
        if count:
            self.reclaims_total.labels(queue).inc(count)

    def loop_blocked(self, queue: str, task: str) -> None:
        self.loop_blocked_total.labels(queue, self.task_label(task)).inc()

    def child_restarted(self, reason: str) -> None:
        self.restarts_total.labels(reason).inc()

    def serve(self, host: str, port: int) -> None:
        """Serve ``/metrics`` from a daemon thread; a port already taken is a clear error."""
        prom = _prometheus()
        try:
            self.server, _ = prom.start_http_server(port, addr=host, registry=self.registry)
        except OSError as exc:
            raise MetricsPortUnavailable(
                f"cannot serve metrics on {host}:{port}: {exc.strerror or exc}; choose another --metrics-port"
            ) from exc

    def close(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None
