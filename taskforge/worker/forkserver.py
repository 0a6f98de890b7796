"""The fork server: a pristine copy of the supervisor that forks the children, so no child imports anything.

A spawned child starts a new interpreter and imports redis-py, taskforge and
the app again (about 0.25 s of CPU each, redis-py alone 0.13 to 0.19 s)
before its first job, while the supervisor, which imported them already,
waits. Forking the supervisor itself would hand the children its Redis
sockets, threads and held locks. So the ``taskforge worker`` command forks
this server once, after the imports and before any thread, socket or
connection exists, and every child is forked from it: it starts with
everything imported and nothing held.

The children stay the supervisor's own: the supervisor is a child
subreaper (``PR_SET_CHILD_SUBREAPER``) and the server forks twice, the
middle process exiting at once, so each child is reparented to the
supervisor. It reaps them, signals them by pid, and they die with it
(``PR_SET_PDEATHSIG``), as spawned children do. The server dies with the
supervisor too (its own parent-death signal, and the end of its socket), and
holds SIGTERM, SIGINT and SIGHUP blocked: a signal sent to the whole process
group must not end it. Its children inherit that mask and let each signal
through once their handler is in place, so a stop sent while a child starts
is kept, not lost.

Linux only (child subreapers, pidfds); elsewhere, or when the command
already runs threads, children are spawned as before. A warm restart
(SIGHUP) closes the server, so the new children import the app afresh.
"""

from __future__ import annotations

import ctypes
import dataclasses
import json
import logging
import mmap
import os
import select
import signal
import socket
import struct
import sys
import threading
import time
import traceback
from collections.abc import Collection
from multiprocessing.connection import Connection, Pipe, wait
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .board import ROW

if TYPE_CHECKING:
    from .child import ChildConfig

log = logging.getLogger("taskforge.worker")

PR_SET_NAME = 15
PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
HELD = {signal.SIGTERM, signal.SIGINT, *([signal.SIGHUP] if hasattr(signal, "SIGHUP") else [])}
SERVER_NAME = b"taskforge-forks"  # /proc/PID/comm (15 bytes at most): what ps and the tests see
CHILD_NAME = b"taskforge-child"
REQUEST_MAX = 1 << 20
REPARENT_WAIT = 10.0  # seconds a new child waits to become the supervisor's; longer means the supervisor died


def _prctl(option: int, value: Any) -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(option, value, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def usable() -> bool:
    """Whether children can be forked from a server here: Linux, pidfds, no thread yet to copy, and no
    database connection the app's import opened (every forked child would talk on its one socket)."""
    return (
        sys.platform == "linux"
        and hasattr(os, "pidfd_open")
        and hasattr(socket, "send_fds")
        and threading.active_count() == 1
        and not django_connected()
    )


def django_connected() -> bool:
    """Django opened a database connection while the app was imported (a query in an ``AppConfig.ready``,
    say). Celery's prefork closes such connections in each child; spawning is simpler and always safe."""
    db = sys.modules.get("django.db")
    if db is None:
        return False
    try:
        return any(getattr(c, "connection", None) is not None for c in db.connections.all(initialized_only=True))
    except Exception:  # an older Django, or settings not configured: cannot tell, so spawn
        return True


class ForkedChild:
    """A child forked by the server, as the pool sees a process: pid, sentinel, exitcode, join."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.sentinel = os.pidfd_open(pid)  # readable once the child has ended; it is ours to reap
        self._code: int | None = None

    @property
    def exitcode(self) -> int | None:
        """None while the child runs; then its code, or minus the signal that ended it (as multiprocessing says)."""
        if self._code is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:  # reaped by someone else: it has ended, how is unknown
                pid, status = self.pid, 1 << 8
            if pid:
                self._code = os.waitstatus_to_exitcode(status)
        return self._code

    def join(self, timeout: float | None = None) -> None:
        """Wait for the end and reap; the pidfd is closed then (the pool forgets a child it joined)."""
        if self.sentinel < 0:
            return
        if self.exitcode is None:
            wait([self.sentinel], timeout)
        if self.exitcode is not None:
            os.close(self.sentinel)
            self.sentinel = -1


class ForkServer:
    """The supervisor's end: ask for a child, get its pid; close to end the server."""

    def __init__(self, pid: int, sock: socket.socket) -> None:
        self.pid = pid
        self.sock = sock

    @classmethod
    def start(cls) -> ForkServer | None:
        """Fork the server from this process, now pristine; None where children must be spawned instead."""
        if not usable() or not _prctl(PR_SET_CHILD_SUBREAPER, 1):
            return None
        parent = os.getpid()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the server, measured by the worker tests
            ours.close()
            code = 1
            try:
                code = serve(theirs, parent)
            finally:
                os._exit(code)
        theirs.close()
        return cls(pid, ours)

    def start_child(self, config: ChildConfig, threads: int) -> tuple[ForkedChild, Connection, Connection, Any]:
        """A new child: its process, the pipe it reports on, the pipe it is told on, its board's shared array."""
        reader, writer = Pipe(duplex=False)
        control_reader, control_writer = Pipe(duplex=False)
        size = ROW * max(1, threads)
        board_fd = os.memfd_create("taskforge-board")
        try:
            os.ftruncate(board_fd, size * 8)
            shared = (ctypes.c_double * size).from_buffer(mmap.mmap(board_fd, size * 8))
            payload = encode_config(config, size)
            self.sock.sendall(struct.pack("!I", len(payload)))
            sent = socket.send_fds(self.sock, [payload], [writer.fileno(), control_reader.fileno(), board_fd])
            self.sock.sendall(payload[sent:])
            pid = struct.unpack("!i", _read_exactly(self.sock, 4))[0]
        finally:
            os.close(board_fd)
            writer.close()
            control_reader.close()
        if pid <= 0:
            raise OSError("the fork server could not fork a child")
        return ForkedChild(pid), reader, control_writer, shared

    def close(self) -> None:
        """End the server (it exits at the end of its socket) and reap it; its children live on."""
        if self.sock.fileno() < 0:
            return
        self.sock.close()
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            try:
                if os.waitpid(self.pid, os.WNOHANG)[0]:
                    return
            except ChildProcessError:
                return
            time.sleep(0.005)
        os.kill(self.pid, signal.SIGKILL)
        os.waitpid(self.pid, 0)


def reap_strays(known: Collection[int]) -> list[int]:
    """Reap this subreaper's zombie children that it never started; the pids reaped.

    A process a job started and left behind (a daemon, or a subprocess of a
    child killed for its timeout) is reparented to the supervisor once its
    parent ends, not to init: when it ends, nobody else would reap it.
    """
    found: list[int] = []
    for task in Path("/proc/self/task").iterdir():
        try:
            found += [int(pid) for pid in (task / "children").read_text().split()]
        except (OSError, ValueError):
            continue
    reaped = []
    for pid in found:
        if pid in known or process_state(pid) != "Z":
            continue
        try:
            if os.waitpid(pid, os.WNOHANG)[0]:
                reaped.append(pid)
        except ChildProcessError:
            pass
    return reaped


def process_state(pid: int) -> str:
    """R, S, Z (ended, not reaped)... from /proc; empty once the process is gone (reaped)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return stat[stat.rindex(")") + 2 :].split()[0]


def encode_config(config: ChildConfig, size: int) -> bytes:
    """A child's config as JSON: plain values only, so the fork server runs no deserializer that could
    build objects (``tests/security/test_no_code_from_jobs.py`` keeps the package free of them)."""
    return json.dumps({"config": dataclasses.asdict(config), "size": size}).encode()


def decode_config(payload: bytes) -> tuple[ChildConfig, int]:
    """``encode_config`` read back in the forked child."""
    from .child import ChildConfig  # the child's module: imported where the child runs

    raw = json.loads(payload)
    fields = dict(raw["config"])
    fields["queues"] = tuple(fields["queues"])
    return ChildConfig(**fields), int(raw["size"])


def _read_exactly(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise OSError("the fork server is gone")
        data += chunk
    return data


def serve(sock: socket.socket, supervisor: int) -> int:  # pragma: no cover - runs in the server process
    """The server's loop: one child per request, until the supervisor closes its end or dies."""
    signal.pthread_sigmask(signal.SIG_BLOCK, HELD)  # never delivered here; unblocked by each child
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != supervisor:
        return 1
    _prctl(PR_SET_NAME, SERVER_NAME)
    while True:
        try:
            size = struct.unpack("!I", _read_exactly(sock, 4))[0]
            payload, fds, _flags, _addr = socket.recv_fds(sock, min(size, REQUEST_MAX), 3)
            while len(payload) < size:
                payload += _read_exactly(sock, size - len(payload))
        except OSError:
            return 0
        pid = fork_child(payload, fds, sock, supervisor)
        for fd in fds:
            os.close(fd)
        sock.sendall(struct.pack("!i", pid))


def fork_child(payload: bytes, fds: list[int], sock: socket.socket, supervisor: int) -> int:  # pragma: no cover
    """Fork twice: the middle process says the child's pid and exits, so the child becomes the supervisor's."""
    said, say = os.pipe()
    middle = os.fork()
    if middle == 0:
        os.close(said)
        middle = os.getpid()  # the child's parent until it exits: known here, not raced for there
        pid = os.fork()
        if pid == 0:
            os.close(say)
            sock.close()
            run_child(payload, fds, supervisor, middle)
        os.write(say, struct.pack("!i", pid))
        os._exit(0)
    os.close(say)
    os.waitpid(middle, 0)
    ready = select.select([said], [], [], 5.0)[0]
    reply = os.read(said, 4) if ready else b""
    os.close(said)
    return struct.unpack("!i", reply)[0] if len(reply) == 4 else -1


def run_child(payload: bytes, fds: list[int], supervisor: int, middle: int) -> None:  # pragma: no cover
    """The child: wait to be the supervisor's, then the usual ``child_main``; never returns."""
    code: Any = 1
    try:
        _prctl(PR_SET_NAME, CHILD_NAME)
        deadline = time.monotonic() + REPARENT_WAIT
        while (parent := os.getppid()) != supervisor:
            # Still the middle process's (it is exiting), or already another's: the supervisor
            # died meanwhile, and this child was given to init. Then it must not go on.
            if parent != middle or time.monotonic() > deadline:
                os._exit(1)
            time.sleep(0.0005)
        from .child import child_main

        root = logging.getLogger()
        for handler in list(root.handlers):  # the supervisor's: the child sets its own up
            root.removeHandler(handler)
        config, size = decode_config(payload)
        pipe, control, board_fd = Connection(fds[0], readable=False), Connection(fds[1], writable=False), fds[2]
        shared = (ctypes.c_double * size).from_buffer(mmap.mmap(board_fd, size * 8))
        os.close(board_fd)
        child_main(config, pipe, control, shared)
        code = 0
    except SystemExit as exc:
        code = exc.code
    except BaseException:
        sys.stderr.write(f"Process taskforge-child (pid {os.getpid()}):\n")
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(code if isinstance(code, int) else 1)
