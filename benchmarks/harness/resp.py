"""A minimal Redis client (RESP2 over a socket) and a MONITOR-based command counter.

The harness cannot import redis-py: it lives only in the peers' venvs, at
different versions. The few commands the harness needs (FLUSHDB, GET, INFO,
ECHO, MONITOR) fit in fifty lines.
"""

from __future__ import annotations

import re
import socket
import threading
from collections import Counter
from dataclasses import dataclass, field
from urllib.parse import urlparse


class RedisError(Exception):
    """An error reply, or a connection that broke."""


def _encode(*args: object) -> bytes:
    out = [b"*%d\r\n" % len(args)]
    for arg in args:
        data = arg if isinstance(arg, bytes) else str(arg).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(data), data))
    return b"".join(out)


class Redis:
    """One connection to one database. Not thread-safe; give each thread its own."""

    def __init__(self, host: str, port: int, db: int, timeout: float = 10.0) -> None:
        self.host, self.port, self.db = host, port, db
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.file = self.sock.makefile("rb")
        if db:
            self.call("SELECT", db)

    @classmethod
    def from_url(cls, url: str, timeout: float = 10.0) -> Redis:
        parsed = urlparse(url)
        db = int(parsed.path.strip("/") or 0)
        return cls(parsed.hostname or "127.0.0.1", parsed.port or 6379, db, timeout)

    def close(self) -> None:
        try:
            self.file.close()
            self.sock.close()
        except OSError:
            pass

    def call(self, *args: object) -> object:
        self.sock.sendall(_encode(*args))
        return self.read_reply()

    def read_reply(self) -> object:
        line = self.file.readline()
        if not line:
            raise RedisError("connection closed by Redis")
        kind, rest = line[:1], line[1:-2]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            raise RedisError(rest.decode())
        if kind == b":":
            return int(rest)
        if kind == b"$":
            size = int(rest)
            if size < 0:
                return None
            data = self.file.read(size + 2)
            return data[:-2]
        if kind == b"*":
            count = int(rest)
            return None if count < 0 else [self.read_reply() for _ in range(count)]
        raise RedisError(f"unexpected reply {line!r}")

    def pipeline(self, commands: list[tuple[object, ...]]) -> list[object]:
        """Send every command, then read every reply; an error reply comes back as its RedisError."""
        self.sock.sendall(b"".join(_encode(*command) for command in commands))
        replies: list[object] = []
        for _ in commands:
            try:
                replies.append(self.read_reply())
            except RedisError as exc:
                if str(exc) == "connection closed by Redis":
                    raise
                replies.append(exc)
        return replies

    def info(self, section: str) -> dict[str, str]:
        raw = self.call("INFO", section)
        assert isinstance(raw, bytes)
        pairs = (line.split(":", 1) for line in raw.decode().splitlines() if ":" in line)
        return {key: value for key, value in pairs}

    def my_addr(self) -> str:
        """This connection's ip:port as Redis shows it in MONITOR."""
        raw = self.call("CLIENT", "INFO")
        assert isinstance(raw, bytes)
        fields = dict(part.split("=", 1) for part in raw.decode().split() if "=" in part)
        return fields["addr"]


# +1700000000.123456 [8 127.0.0.1:54321] "EVALSHA" "..."   (or [8 lua] inside a script)
MONITOR_LINE = re.compile(rb'^\+\d+\.\d+ \[(\d+) ([^\]]+)\] "([^"]*)"(?: "([^"]*)")?')
MARK_PREFIX = "bench-mark:"


@dataclass
class Segment:
    """Commands seen in one database between two markers."""

    label: str
    client: Counter[str] = field(default_factory=Counter)  # sent by a client (a script call counts once)
    lua: Counter[str] = field(default_factory=Counter)  # run inside scripts (MONITOR shows them as client "lua")

    def as_dict(self, jobs: int) -> dict[str, object]:
        total_client = sum(self.client.values())
        total_lua = sum(self.lua.values())
        total = total_client + total_lua
        return {
            "total_commands": total,
            "total_per_job": round(total / jobs, 3) if jobs else None,
            "client_commands": total_client,
            "client_per_job": round(total_client / jobs, 3) if jobs else None,
            "lua_commands": total_lua,
            "lua_per_job": round(total_lua / jobs, 3) if jobs else None,
            "client_by_command": dict(self.client.most_common()),
            "lua_by_command": dict(self.lua.most_common()),
        }


class CommandCounter:
    """Counts the commands run in one database, split into segments by marker ECHOes.

    Why MONITOR rather than ``CONFIG RESETSTAT`` + ``INFO commandstats``: the
    Redis may be shared with other test runs on other databases,
    and commandstats is server-wide, so it would count their commands too.
    MONITOR lines carry the database and the client address, so filtering on
    our queue database leaves exactly the library's commands. The counter
    INCRs and our polling live in another database and so never show up;
    commands from ``ignore_addr`` (the harness's own control connection) are
    dropped. Connection handshakes (HELLO, CLIENT SETINFO) run before the
    SELECT and show as db 0, so they are not counted; the SELECT itself is.

    Markers are ``ECHO bench-mark:<label>`` sent on the watched database:
    Redis runs commands one at a time, so everything before the marker in
    the stream happened before it.
    """

    def __init__(self, host: str, port: int, db: int, ignore_addr: str) -> None:
        self.db = str(db).encode()
        self.ignore = ignore_addr.encode()
        self.segments: list[Segment] = [Segment("(before first mark)")]
        self.marks_seen: set[str] = set()
        self.cond = threading.Condition()
        self.error: str | None = None
        self.conn = Redis(host, port, 0, timeout=None)  # type: ignore[arg-type]
        self.conn.sock.sendall(_encode("MONITOR"))
        if self.conn.file.readline().strip() != b"+OK":
            raise RedisError("MONITOR refused")
        self.thread = threading.Thread(target=self._read, name="bench-monitor", daemon=True)
        self.thread.start()

    def _read(self) -> None:
        try:
            for line in self.conn.file:
                match = MONITOR_LINE.match(line)
                if not match or match.group(1) != self.db:
                    continue
                addr, name, first_arg = match.group(2), match.group(3).upper().decode(), match.group(4)
                if name == "ECHO" and first_arg and first_arg.startswith(MARK_PREFIX.encode()):
                    label = first_arg[len(MARK_PREFIX) :].decode()
                    with self.cond:
                        self.segments.append(Segment(label))
                        self.marks_seen.add(label)
                        self.cond.notify_all()
                    continue
                if addr == self.ignore:
                    continue
                segment = self.segments[-1]
                if addr == b"lua":
                    segment.lua[name] += 1
                else:
                    segment.client[name] += 1
        except (OSError, ValueError) as exc:  # closed by stop()
            self.error = str(exc)
        with self.cond:
            self.cond.notify_all()

    def wait_mark(self, label: str, timeout: float = 30.0) -> None:
        """Block until the reader thread has passed marker ``label``."""
        with self.cond:
            if not self.cond.wait_for(lambda: label in self.marks_seen or not self.thread.is_alive(), timeout):
                raise RedisError(f"MONITOR did not deliver marker {label!r} within {timeout:g} s")
        if label not in self.marks_seen:
            raise RedisError(f"MONITOR stream ended before marker {label!r}: {self.error}")

    def segment(self, label: str) -> Segment:
        for seg in self.segments:
            if seg.label == label:
                return seg
        raise KeyError(label)

    def stop(self) -> None:
        try:
            self.conn.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.conn.close()
        self.thread.join(5)
