"""``taskforge demo``: the whole loop in one command, on the embedded broker.

Broker (in this process) -> a real 2-child worker (a subprocess running
``taskforge.demo_app``) -> a few hundred jobs of every priority, some failing
and retrying, one dying, one scheduled -> a progress bar -> the status
table -> what happened. Whatever happens, including Ctrl-C and SIGTERM, the
worker and the broker are stopped before the command returns.
"""

from __future__ import annotations

import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import click

from .. import demo_app, status
from ..app import TaskForge
from ..broker.connection import ENV_VAR
from ..handle import JobHandle, job_info
from ..job import JobInfo, JobState
from .common import FAILURE, fail
from .status import format_status

WORKER_APP = "taskforge.demo_app:app"
FINISH_WITHIN = 25.0  # seconds for every job to finish before the demo gives up
WORKER_STOP_WAIT = 10.0
SCHEDULED_IN = 2.0
INTERRUPTED = 130


@dataclass(frozen=True)
class Batch:
    task: str
    priority: str
    calls: list[tuple[Any, ...]]


def plan() -> list[Batch]:
    """Lowest priority first, so the worker has every reason to get the order wrong."""
    return [
        Batch(demo_app.build_report.name, "low", [(day,) for day in range(50)]),
        Batch(demo_app.resize_image.name, "normal", [(i, 256 + i) for i in range(120)]),
        Batch(demo_app.call_flaky_api.name, "normal", [(i,) for i in range(15)]),
        Batch(demo_app.send_email.name, "high", [(f"user{i}@example.com",) for i in range(80)]),
        Batch(demo_app.charge_card.name, "critical", [(i, 1000 + i) for i in range(30)]),
        Batch(demo_app.sync_inventory.name, "normal", [("north",)]),
    ]


@click.command()
def demo() -> None:
    """Run the whole loop on the embedded broker, no Redis needed (under 10 s).

    Starts a development broker in this process and a real worker
    (`taskforge worker taskforge.demo_app:app -c 2`), queues a few hundred
    jobs of mixed priorities (some fail and retry, one ends dead, one is
    scheduled 2 s ahead), shows their progress, the status table and what
    happened, then stops everything.

    \b
    Example:
      taskforge demo
    """
    from ..devbroker import DevBroker
    from ..errors import BrokerStartError

    try:
        with sigterm_as_interrupt(), DevBroker(port=0) as broker, tempfile.TemporaryDirectory() as tmp:
            run(broker.url, Path(tmp) / "worker.log")
        click.echo("(the worker was stopped with SIGTERM, then the broker; nothing is left running)")
    except BrokerStartError as exc:
        fail(str(exc), FAILURE)
    except KeyboardInterrupt:
        click.echo("\ninterrupted: the worker and the broker are stopped", err=True)
        sys.exit(INTERRUPTED)


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    def interrupt(*_: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def run(url: str, log_path: Path) -> None:
    click.echo(f"broker: embedded development broker at {url} (in this process, in memory)")
    with log_path.open("wb") as log, worker_process(url, log) as worker:
        click.echo(f"worker: `taskforge worker {WORKER_APP} -c 2` started (pid {worker.pid})")
        producer = TaskForge("demo-producer", broker=url)
        handles = enqueue(producer)
        click.echo(f"queued {len(handles)} jobs; running them:")
        started = time.monotonic()
        wait_with_progress(producer, worker, len(handles), log_path)
        elapsed = time.monotonic() - started
        infos = read_all(producer, handles)
        wait_for_heartbeat(producer, sum(i.attempts for i in infos))
        click.echo("")
        click.echo(format_status(status.status(producer)))
        click.echo("")
        click.echo(summary(infos, worker.pid, url, elapsed))


@contextmanager
def worker_process(url: str, log: IO[bytes]) -> Iterator[subprocess.Popen[bytes]]:
    """A real worker in its own session: Ctrl-C reaches only us, and we stop it in order."""
    env = {**os.environ, ENV_VAR: url, "PYTHONUNBUFFERED": "1"}
    command = [
        sys.executable,
        "-m",
        "taskforge",
        "worker",
        WORKER_APP,
        "-c",
        "2",
        "--log-level",
        "warning",
        "--visibility-timeout",
        "3",
        "--grace",
        "5",
    ]
    worker = subprocess.Popen(
        command, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
    )
    try:
        yield worker
    finally:
        stop_worker(worker)


def stop_worker(worker: subprocess.Popen[bytes]) -> None:
    """SIGTERM, a bounded wait, then SIGKILL the whole group: nothing outlives the demo.

    The SIGKILL runs even when a second Ctrl-C cuts the wait short.
    """
    try:
        if worker.poll() is None:
            worker.send_signal(signal.SIGTERM)
            worker.wait(WORKER_STOP_WAIT)
    except subprocess.TimeoutExpired:
        pass
    finally:
        try:
            os.killpg(worker.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        worker.wait()


def enqueue(producer: TaskForge) -> list[JobHandle[Any]]:
    handles: list[JobHandle[Any]] = []
    for batch in plan():
        task = producer.task_for(batch.task).with_options(priority=batch.priority)
        handles += task.delay_many(batch.calls)
    reminder = producer.task_for(demo_app.send_reminder.name).with_options(priority="critical")
    handles.append(reminder.apply_in(SCHEDULED_IN, "ada"))
    return handles


def unfinished(producer: TaskForge) -> int:
    counts = producer.broker.inspection.counts("default")
    return counts["pending"] + counts["scheduled"] + counts["running"]


def wait_with_progress(producer: TaskForge, worker: subprocess.Popen[bytes], total: int, log: Path) -> None:
    deadline = time.monotonic() + FINISH_WITHIN
    with progress(total) as update:
        while True:
            remaining = unfinished(producer)
            update(total - remaining)
            if remaining == 0:
                return
            if worker.poll() is not None:
                fail(f"the worker exited with code {worker.returncode}:\n{tail(log)}", FAILURE)
            if time.monotonic() > deadline:
                fail(
                    f"{remaining} jobs still unfinished after {FINISH_WITHIN:.0f} s; worker log:\n{tail(log)}", FAILURE
                )
            time.sleep(0.1)


@contextmanager
def progress(total: int) -> Iterator[Any]:
    """A progress bar on a terminal; elsewhere a plain line about once a second."""
    if sys.stdout.isatty():
        with click.progressbar(length=total, label="  jobs finished", show_eta=False, show_pos=True) as bar:
            shown = [0]

            def advance(done: int) -> None:
                bar.update(done - shown[0])
                shown[0] = done

            yield advance
        return
    last = [-1.0, -1]

    def line(done: int) -> None:
        now = time.monotonic()
        if done != last[1] and (now - last[0] >= 1.0 or done == total):
            click.echo(f"  {done}/{total} jobs finished")
            last[:] = [now, done]

    yield line


def tail(log: Path, lines: int = 15) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no worker log)"


def read_all(producer: TaskForge, handles: list[JobHandle[Any]]) -> list[JobInfo]:
    ids = [h.id for h in handles]
    rows = producer.broker.inspection.read_many("default", ids)
    return [job_info(job_id, "default", fields) for job_id, fields in zip(ids, rows, strict=True) if fields]


def wait_for_heartbeat(producer: TaskForge, runs: int, timeout: float = 1.5) -> None:
    """The worker publishes its count of finished runs with each heartbeat (every second here)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if sum(w.jobs_done for w in status.workers(producer)) >= runs:
            return
        time.sleep(0.1)


def summary(infos: list[JobInfo], worker_pid: int, url: str, elapsed: float) -> str:
    by_task: dict[str, list[JobInfo]] = {}
    for info in infos:
        by_task.setdefault(info.task, []).append(info)
    lines = [
        click.style("What just happened", bold=True),
        f"  1. A development broker (fakeredis speaking the Redis protocol) served {url} from this process.",
        f"  2. A real worker ran: a supervisor (pid {worker_pid}) and 2 child processes, each importing",
        "     taskforge/demo_app.py and running jobs by task name.",
        f"  3. {len(infos)} jobs ran in {elapsed:.1f} s, the highest priority ready job first: the low ones were",
        f"     queued first, yet finished last ({priority_order(infos)}).",
        *flaky_lines(by_task.get(demo_app.call_flaky_api.name, [])),
        *dead_lines(by_task.get(demo_app.sync_inventory.name, [])),
        *scheduled_lines(by_task.get(demo_app.send_reminder.name, [])),
        "",
        "Do it with your own code: `taskforge broker` (or a real Redis), then `taskforge worker myapp:app`,",
        "and `taskforge status myapp:app` to watch. The app this demo ran, to start from:",
        f"  {Path(demo_app.__file__).resolve()}",
    ]
    return "\n".join(lines)


def priority_order(infos: list[JobInfo]) -> str:
    """Median finish time per priority, relative to the first job created."""
    start = min(i.created_at for i in infos if i.created_at)
    medians = {}
    for name in status.PRIORITY_NAMES:
        done = [
            (i.finished_at - start).total_seconds()
            for i in infos
            if i.finished_at and i.priority.name.lower() == name and i.scheduled_at is None
        ]
        if done:
            medians[name] = statistics.median(done)
    return "median finish: " + ", ".join(f"{name} +{t:.1f} s" for name, t in medians.items())


def flaky_lines(flaky: list[JobInfo]) -> list[str]:
    retried = [i for i in flaky if i.state is JobState.SUCCEEDED and i.attempts > 1]
    return [
        f"  4. {len(retried)} of {len(flaky)} call_flaky_api jobs raised ConnectionError on their first attempt,",
        "     waited out their backoff (state: retrying) and succeeded on the next one.",
    ]


def dead_lines(doomed: list[JobInfo]) -> list[str]:
    if not doomed:
        return []
    info = doomed[0]
    return [
        f"  5. sync_inventory failed all {info.attempts} of its attempts and is {info.state.value}:",
        f"     {info.error}",
        "     It waits in the dead-letter set: `taskforge dead APP list` shows it, `... retry` reruns it.",
    ]


def scheduled_lines(scheduled: list[JobInfo]) -> list[str]:
    info = scheduled[0] if scheduled else None
    if info is None or not (info.started_at and info.scheduled_at):
        return []
    late = (info.started_at - info.scheduled_at).total_seconds()
    return [
        f"  6. send_reminder was scheduled {SCHEDULED_IN:.0f} s ahead (apply_in): it joined the line when due",
        f"     and started {max(late, 0) * 1000:.0f} ms later.",
    ]
