"""The suite's own Redis server: a test run never empties a database it did not create.

The tests flush the databases they use (fifteen of one server, one per
xdist worker, and the chaos test's side store). Pointed by default at
127.0.0.1:6379, the README's test command emptied those databases of
whatever Redis a developer runs there. So unless ``TASKFORGE_TEST_REDIS``
names a server (CI names its own; a developer may name one on purpose),
the controller process starts ``redis-server`` on a free port, without
persistence, before the xdist workers start: they, and every process a
test starts, inherit its address through that variable. It is stopped
when the controller exits.
"""

from __future__ import annotations

import atexit
import os
import shutil
import socket
import subprocess
import time

import redis

STARTUP_S = 10.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start(variable: str, side_variable: str) -> str | None:
    """Start the suite's server unless ``variable`` names one; the reason the real-Redis tests cannot run, or None.

    Sets ``variable`` (database 15, the first worker's) and ``side_variable``
    (database 10, the chaos test's side store) to the new server.
    """
    if os.environ.get(variable):
        return None
    binary = shutil.which("redis-server")
    if binary is None:
        return f"no redis-server on PATH to start the suite's own (install Redis, or set {variable}=redis://...)"
    port = free_port()
    proc = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        start_new_session=True,  # a Ctrl-C of the run reaches pytest, which then stops it
    )
    atexit.register(stop, proc)
    client = redis.Redis(port=port, socket_connect_timeout=1)
    deadline = time.monotonic() + STARTUP_S
    while True:
        try:
            client.ping()
            break
        except redis.ConnectionError:
            if proc.poll() is not None or time.monotonic() > deadline:
                stop(proc)
                return f"the suite's own redis-server (port {port}) did not start"
            time.sleep(0.05)
        finally:
            client.close()
    os.environ[variable] = f"redis://127.0.0.1:{port}/15"
    os.environ.setdefault(side_variable, f"redis://127.0.0.1:{port}/10")
    return None


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
