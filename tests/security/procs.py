"""Processes the security tests own: private redis-servers (AUTH, ACL, TLS) and taskforge commands.

Every process runs in a session of its own, every wait is bounded, and
``Processes.close()`` kills whatever is left, then checks that no process of
any of those sessions survived (no orphans).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis

from tests.conftest import skip_or_fail
from tests.worker.conftest import group_pids, wait_for

COMMAND_TIMEOUT = 30.0
# One child, and a short grace so SIGTERM ends a worker in seconds (the default is 30 s).
WORKER = ("worker", "secapp:app", "-c", "1", "--grace", "2")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def report(problems: list[str], tail: str = "") -> None:
    """Fail with every problem listed once (an assert would print them twice, as its repr)."""
    if problems:
        pytest.fail(f"{len(problems)} problem(s):\n" + "\n".join(problems) + tail, pytrace=False)


# The server matrix (tests/servers/matrix.py) points this at a bundled redis-server or valkey-server.
SERVER_BIN_VAR = "TASKFORGE_TEST_SERVER_BIN"


def redis_server_binary() -> str:
    path = os.environ.get(SERVER_BIN_VAR) or shutil.which("redis-server")
    if path is None:
        skip_or_fail("the security tests need the redis-server binary for private servers (AUTH, ACL, TLS)")
    return str(path)


@dataclass
class Finished:
    code: int
    output: str  # stdout and stderr, interleaved as the process wrote them


class Processes:
    """Starts and always cleans up; one per test."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.live: list[subprocess.Popen[bytes]] = []
        self.count = 0

    def popen(
        self, argv: Sequence[str], env: dict[str, str] | None = None, cwd: Path | None = None, log: Path | None = None
    ) -> tuple[subprocess.Popen[bytes], Path]:
        self.count += 1
        log = log or self.tmp / f"proc-{self.count}.log"
        with log.open("ab") as out:
            proc = subprocess.Popen(
                list(argv),
                cwd=cwd or self.tmp,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.live.append(proc)
        return proc, log

    def taskforge(self, *args: str, url: str, cwd: Path, timeout: float = COMMAND_TIMEOUT) -> Finished:
        """Run one ``taskforge`` command to its end (bounded) and return its exit code and all its output."""
        proc, log = self.popen([sys.executable, "-m", "taskforge", *args], env=taskforge_env(url), cwd=cwd)
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_session(proc)
            raise AssertionError(
                f"`taskforge {' '.join(args)}` did not finish within {timeout} s; output:\n"
                f"{log.read_text(errors='replace')[-2000:]}"
            ) from None
        return Finished(code, log.read_text(errors="replace"))

    def taskforge_many(
        self, commands: Sequence[Sequence[str]], url: str, cwd: Path, timeout: float = COMMAND_TIMEOUT
    ) -> dict[str, Finished]:
        """Run several ``taskforge`` commands at once (they mostly wait on imports); keyed by command line."""
        started = {" ".join(args): self.start_taskforge(*args, url=url, cwd=cwd) for args in commands}
        deadline = time.monotonic() + timeout
        done = {}
        for line, spawned in started.items():
            try:
                code = spawned.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                kill_session(spawned.proc)
                raise AssertionError(
                    f"`taskforge {line}` did not finish within {timeout} s; output:\n{spawned.output()[-2000:]}"
                ) from None
            done[line] = Finished(code, spawned.output())
        return done

    def start_taskforge(self, *args: str, url: str, cwd: Path) -> Spawned:
        proc, log = self.popen([sys.executable, "-m", "taskforge", *args], env=taskforge_env(url), cwd=cwd)
        return Spawned(proc, log)

    def close(self) -> None:
        for proc in self.live:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 15  # workers here run with --grace 2
        for proc in self.live:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        leftovers = {}
        for proc in self.live:
            deadline = time.monotonic() + 5
            while group_pids(proc.pid) and time.monotonic() < deadline:
                time.sleep(0.05)
            if group_pids(proc.pid):
                leftovers[proc.pid] = group_pids(proc.pid)
            kill_session(proc)
        assert not leftovers, f"processes outlived their session leader: {leftovers}"


@dataclass
class Spawned:
    proc: subprocess.Popen[bytes]
    log: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self, timeout: float = 20) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_session(self.proc)
            raise AssertionError(f"pid {self.proc.pid} ignored SIGTERM for {timeout} s") from None


def kill_session(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


def taskforge_env(url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TASKFORGE_")}
    return {**env, "TASKFORGE_BROKER_URL": url, "PYTHONUNBUFFERED": "1"}


class PrivateRedis:
    """A redis-server on a free loopback port, configured by command-line options, stopped by the test."""

    def __init__(
        self,
        processes: Processes,
        *options: str,
        tls: Path | None = None,
        port: int | None = None,
        binary: str | None = None,
    ) -> None:
        self.processes = processes
        self.binary = binary
        self.options = list(options)
        self.tls = tls  # the directory holding ca.pem, server.pem, server.key
        self.port = port or free_port()
        self.dir = processes.tmp / f"redis-{self.port}"
        self.dir.mkdir(exist_ok=True)
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = self.dir / "server.log"

    def argv(self) -> list[str]:
        argv = [
            self.binary or redis_server_binary(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(self.dir),
            "--logfile",
            str(self.log),
        ]
        if self.tls is None:
            argv += ["--port", str(self.port)]
        else:
            argv += [
                "--port",
                "0",
                "--tls-port",
                str(self.port),
                "--tls-cert-file",
                str(self.tls / "server.pem"),
                "--tls-key-file",
                str(self.tls / "server.key"),
                "--tls-ca-cert-file",
                str(self.tls / "ca.pem"),
                "--tls-auth-clients",
                "no",
            ]
        return argv + self.options

    def start(self, ready: Callable[[], object], timeout: float = 15) -> PrivateRedis:
        self.proc, _ = self.processes.popen(self.argv(), log=self.dir / "stdout.log")

        def up() -> object:
            if self.proc is not None and self.proc.poll() is not None:
                raise AssertionError(f"redis-server exited with {self.proc.returncode}: {self.server_output()}")
            try:
                return ready()
            except (redis.ConnectionError, redis.TimeoutError, OSError):
                return False

        wait_for(up, timeout, f"redis-server on port {self.port} to accept commands", interval=0.05)
        return self

    def server_output(self) -> str:
        text = ""
        for path in (self.dir / "stdout.log", self.log):
            if path.exists():
                text += path.read_text(errors="replace")
        return text[-2000:]

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                kill_session(self.proc)
