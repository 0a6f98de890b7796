"""Real worker processes against real Redis, in a temp directory holding a user app.

Every worker runs in its own process group, so the fixture can check, after
each test, that no process of that group survived: no orphans, ever.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from taskforge import JobState, TaskForge
from tests.conftest import admin_client, admin_url

HERE = Path(__file__).parent
USER_APPS = ("userapp.py", "featureapp.py", "logapp.py", "limitsapp.py")
USER_APP = (HERE / "userapp.py").read_text()


def wait_for(predicate: Callable[[], object], timeout: float, message: str, interval: float = 0.05) -> object:
    """A bounded poll: every wait in these tests ends, one way or the other."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout} s waiting for: {message}")


def free_port() -> int:
    """A loopback port nothing listens on, for a private server or endpoint of one test."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def group_pids(pgid: int) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        state, pgrp = fields[0], int(fields[2])
        if pgrp == pgid and state != "Z":
            pids.append(int(entry.name))
    return pids


def child_pids(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(p) for p in text.split()]


def comm(pid: int) -> str:
    """The process's name: ``taskforge-child`` for a forked child, ``taskforge-forks`` for the fork server."""
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


class Worker:
    """One ``taskforge worker`` command, started in its own session."""

    def __init__(self, cwd: Path, url: str, args: list[str], log: Path, app: str = "userapp:app") -> None:
        env = {**os.environ, "TASKFORGE_BROKER_URL": url, "SIDE_REDIS": admin_url(url), "PYTHONUNBUFFERED": "1"}
        self.log_path = log
        self.log = log.open("ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "taskforge", "worker", app, *args],
            cwd=cwd,
            env=env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.pgid = self.proc.pid

    @property
    def pid(self) -> int:
        return self.proc.pid

    def children(self) -> list[int]:
        """Its child processes but the fork server (``fork_server``), which runs no job."""
        return [pid for pid in child_pids(self.proc.pid) if comm(pid) != "taskforge-forks"]

    def fork_server(self) -> int | None:
        return next((pid for pid in child_pids(self.proc.pid) if comm(pid) == "taskforge-forks"), None)

    def wait_children(self, n: int, timeout: float = 20) -> list[int]:
        return wait_for(
            lambda: len(self.children()) >= n and self.children(), timeout, f"{n} children of worker {self.pid}"
        )  # type: ignore[return-value]

    def signal(self, signum: int) -> None:
        if self.proc.poll() is None:  # reaped: its pid may be another process's by now
            os.kill(self.proc.pid, signum)

    def wait(self, timeout: float) -> int:
        return self.proc.wait(timeout=timeout)

    def output(self) -> str:
        self.log.flush()
        return self.log_path.read_text(errors="replace")

    def kill_group(self) -> None:
        try:
            os.killpg(self.pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        self.log.close()


@pytest.fixture
def side(redis_url: str) -> redis.Redis:
    """Where user tasks record their runs: the test Redis, under side:* keys."""
    return admin_client(redis_url)


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    for name in USER_APPS:
        (tmp_path / name).write_text((HERE / name).read_text())
    return tmp_path


@pytest.fixture
def start_worker(workdir: Path, redis_url: str) -> Iterator[Callable[..., Worker]]:
    started: list[Worker] = []

    def start(*args: str, url: str | None = None, app: str = "userapp:app") -> Worker:
        worker = Worker(workdir, url or redis_url, list(args), workdir / f"worker-{len(started)}.log", app)
        started.append(worker)
        return worker

    yield start
    stop_workers(started)


def stop_workers(started: list[Worker], grace: float = 15) -> None:
    """SIGTERM each worker still running, then fail if any process of its group outlived it."""
    leftovers = {worker.pid: stop(worker, grace) for worker in started}
    leftovers = {pid: pids for pid, pids in leftovers.items() if pids}
    assert not leftovers, f"processes outlived their worker: {leftovers}"


def stop(worker: Worker, timeout: float = 15) -> list[int]:
    """SIGTERM the worker, then kill its group; the pids that outlived it (none, if all is well)."""
    if worker.proc.poll() is None:
        worker.signal(signal.SIGTERM)
        try:
            worker.wait(timeout)
        except subprocess.TimeoutExpired:
            pass
    # Children die with their supervisor within a couple of seconds.
    deadline = time.monotonic() + 5
    while group_pids(worker.pgid) and time.monotonic() < deadline:
        time.sleep(0.05)
    leftovers = group_pids(worker.pgid)
    worker.kill_group()
    return leftovers


@pytest.fixture
def producer(redis_url: str) -> TaskForge:
    """An app that sends jobs by name, as a web process would: it has none of the worker's tasks."""
    return TaskForge("producer", broker=redis_url)


def final(handle: Any, timeout: float = 30) -> JobState:
    """The state a job ends in, waited for."""
    return wait_for(
        lambda: handle.status() if handle.status().finished else None, timeout, f"job {handle.id} to finish"
    )
