"""The processes the chaos test owns: one private redis-server and the workers.

Each runs in its own session (process group), so cleanup can kill a whole
group and the test can check that nothing of a group outlived it.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis


def wait_for(predicate: Callable[[], Any], timeout: float, message: str, interval: float = 0.05) -> Any:
    """A bounded poll: every wait in the chaos test ends, one way or the other."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for: {message}")
        time.sleep(interval)


def group_pids(pgid: int) -> list[int]:
    """Live (non-zombie) processes of a process group, from /proc."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[2]) == pgid and fields[0] != "Z":
            pids.append(int(entry.name))
    return pids


def child_pids(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def is_job_child(pid: int) -> bool:
    try:
        name = Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return False
    return name == "taskforge-child" or "spawn_main" in cmdline(pid)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


class RedisServer:
    """A private redis-server on a loopback port, durable: AOF, fsync on every write."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = directory / "redis.log"
        self.client = redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=5, socket_connect_timeout=2)

    def command(self) -> list[str]:
        return [
            "redis-server",
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "yes",
            "--appendfsync",
            "always",
            "--dir",
            str(self.dir),
            "--logfile",
            str(self.log),
            "--daemonize",
            "no",
        ]

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def start(self, timeout: float = 30) -> None:
        self.proc = subprocess.Popen(
            self.command(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        wait_for(self.ready, timeout, f"redis-server on port {self.port} to accept commands", interval=0.02)

    def ready(self) -> bool:
        if self.proc is not None and self.proc.poll() is not None:
            raise AssertionError(f"redis-server exited with {self.proc.returncode}; see {self.log}")
        try:
            return bool(self.client.ping()) and self.client.info("persistence").get("loading") == 0
        except redis.RedisError:
            return False

    def kill(self) -> None:
        if self.proc is None:
            return
        self.proc.kill()
        self.proc.wait(timeout=10)
        self.client.connection_pool.disconnect()

    def pause(self) -> None:
        self.signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.signal(signal.SIGCONT)

    def signal(self, signum: int) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signum)

    def cleanup(self) -> None:
        if self.proc is not None:
            kill_group(self.proc.pid)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        self.client.close()


class WorkerProcess:
    """One ``taskforge worker`` command in its own session; its output goes to a log file."""

    def __init__(self, number: int, cwd: Path, env: dict[str, str], args: list[str]) -> None:
        self.number = number
        self.log_path = cwd / f"worker-{number}.log"
        self.signalled: str | None = None  # "SIGKILL" / "SIGTERM" once the fault driver sent one
        self.signalled_at: float | None = None
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "taskforge", "worker", "chaosapp:app", *args],
                cwd=cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.started_at = time.time()
        self.pid = self.proc.pid
        self.exited_at: float | None = None
        self._scanned = 0

    def __repr__(self) -> str:
        return f"worker#{self.number}(pid {self.pid})"

    def alive(self) -> bool:
        if self.proc.poll() is None:
            return True
        if self.exited_at is None:
            self.exited_at = time.time()
        return False

    @property
    def active(self) -> bool:
        """Running and not told to stop: counts towards the workers the test keeps up."""
        return self.signalled is None and self.alive()

    def job_children(self) -> list[int]:
        """Its job-running children: forked by its fork server (named so), or spawned; not the fork server
        itself, nor multiprocessing's resource tracker."""
        return [p for p in child_pids(self.pid) if is_job_child(p)]

    def send(self, signum: signal.Signals) -> None:
        self.signalled, self.signalled_at = signum.name, time.time()
        if self.proc.poll() is not None:  # reaped: its pid may be another process's by now
            return
        try:
            os.kill(self.pid, signum)
        except ProcessLookupError:
            pass

    def new_traceback(self) -> bool:
        """Whether a traceback appeared in the log since the last call."""
        start = max(0, self._scanned - 16)  # a word cut in two by the last read
        with self.log_path.open("rb") as f:
            f.seek(start)
            chunk = f.read()
        self._scanned = start + len(chunk)
        return b"Traceback" in chunk

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")

    def cleanup(self) -> None:
        kill_group(self.pid)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass


CHAINED = ("During handling of the above exception", "The above exception was the direct cause")
# Lines another process wrote into the same log while a traceback was being printed.
INTERLEAVED = re.compile(r"\d{4}-\d\d-\d\d \d\d:|Process taskforge-child")


def tracebacks(text: str) -> list[tuple[str, str, str]]:
    """Each uncaught error in a worker's output: (owner, where, exception line).

    ``owner``: "child" (multiprocessing announced it, or its ``_bootstrap``
    frame shows), "spawn" (a child that died unpickling what its supervisor sends at
    start: it was killed mid-spawn), else "supervisor".  ``where`` is the
    innermost taskforge frame, as path:line function; the exception line is
    empty when the process was killed while printing.  Chained tracebacks
    count as one error; lines of other processes interleaved are skipped.
    """
    lines = text.splitlines()
    found = []
    i = 0
    while i < len(lines):
        if not lines[i].startswith("Traceback (most recent call last)"):
            i += 1
            continue
        announced = i > 0 and lines[i - 1].startswith("Process taskforge-child")
        frames: list[str] = []
        error = ""
        while i < len(lines):
            i += 1
            while i < len(lines) and (lines[i].startswith(" ") or not lines[i] or INTERLEAVED.match(lines[i])):
                if lines[i].lstrip().startswith('File "'):
                    frames.append(lines[i].strip())
                i += 1
            error = lines[i] if i < len(lines) else ""
            j = i + 1
            while j < len(lines) and not lines[j].strip():
                j += 1
            if j < len(lines) and lines[j].startswith(CHAINED):
                i = j + 1
                while i < len(lines) and not lines[i].startswith("Traceback"):
                    i += 1
                continue
            break
        ours = [f for f in frames if "/taskforge/" in f]
        if announced or any("multiprocessing/process.py" in f and "_bootstrap" in f for f in frames):
            owner = "child"
        elif not ours and any("multiprocessing/spawn.py" in f for f in frames):
            owner = "spawn"
        else:
            owner = "supervisor"
        where = "?"
        if ours:  # File "/x/taskforge/worker/child.py", line 141, in run
            path, line, func = ours[-1].split(", ", 2)
            where = f"taskforge/{path.split('/taskforge/', 1)[1].rstrip(chr(34))}:{line.split()[-1]} {func}"
        found.append((owner, where, error))
        i += 1
    return found
