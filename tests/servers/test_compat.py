"""The server quirks of ``broker/compat.py`` on the exact replies each server sends (no server needed)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

from taskforge import ConfigurationError, JobState, TaskForge
from taskforge.broker import compat
from taskforge.broker.scripts import denied_in_script, script_source
from taskforge.devbroker import DevBroker

SHA = "d2ced8395b88d602f0ab9c07783bf3a7e6504510"
# What each server said when an ACL denied ZPOPMIN on line 3 of a script (captured from each).
DENIALS = {
    "redis-6.2": (
        f"Error running script (call to f_{SHA}): @user_script:3: @user_script: 3: "
        "The user executing the script can't run this command or subcommand"
    ),
    "redis-7.0": (
        f"The user executing the script can't run this command or subcommand script: {SHA}, on @user_script:3."
    ),
    "redis-7.2+/valkey-8": (
        "ACL failure in script: User taskforge has no permissions to run the 'zpopmin' command "
        f"script: {SHA}, on @user_script:3."
    ),
    "valkey-9": "ACL failure in script: User taskforge has no permissions to run the 'zpopmin' command script: "
    "on @user_script:3.",
}


@pytest.mark.parametrize("server", DENIALS)
def test_an_acl_denial_inside_a_script_is_recognised_in_every_wording(server: str) -> None:
    denial = compat.script_denial(DENIALS[server])
    assert denial is not None and denial.line == 3
    assert denial.command == (None if server in ("redis-6.2", "redis-7.0") else "zpopmin")


@pytest.mark.parametrize("server", DENIALS)
def test_the_denied_command_is_named_in_every_wording(server: str) -> None:
    line = next(i for i, text in enumerate(script_source("dequeue").splitlines(), 1) if "'ZPOPMIN'" in text)
    message = DENIALS[server].replace("user_script:3", f"user_script:{line}").replace("script: 3", f"script: {line}")
    described = denied_in_script("dequeue", message)
    assert described is not None and "'zpopmin'" in described and "dequeue script" in described, described


def test_other_script_errors_are_not_taken_for_denials() -> None:
    for message in (
        "ERR Error running script (call to f_x): @user_script:3: WRONGTYPE Operation against a key",
        "NOSCRIPT No matching script. Please use EVAL.",
        "ERR user_script:1: Script attempted to access nonexistent global variable 'x'",
    ):
        assert compat.script_denial(message) is None and denied_in_script("dequeue", message) is None


@pytest.mark.parametrize("seconds", [0.0, 0.001, 0.0015, -1.0, 1e-9])
def test_no_blocking_timeout_below_2_ms_is_sent(seconds: float) -> None:
    """Redis 6.x/7.0.0-7.0.7 truncate to whole ms: 0.001 s -> 0 -> block forever."""
    sent = compat.block_timeout(seconds)
    assert sent == 0.002 and int(sent * 1000) >= 1


def test_longer_timeouts_are_sent_as_given() -> None:
    assert compat.block_timeout(0.25) == 0.25 and compat.block_timeout(5) == 5


def test_versions_and_hello_replies() -> None:
    assert compat.parse_version("7.0.15") == (7, 0, 15) and compat.parse_version("8.2.0-rc1") == (8, 2, 0)
    resp3 = {b"server": b"valkey", b"version": b"9.1.2", b"proto": 3}
    resp2 = [b"server", b"redis", b"version", b"6.2.14", b"proto", 2]
    assert compat.server_from_hello(resp3) == compat.Server("valkey", (9, 1, 2))
    assert compat.server_from_hello(resp2).text == "redis 6.2.14"


@pytest.mark.parametrize("version", [(6, 2, 0), (7, 0, 15), (7, 2, 4), (9, 1, 2)])
def test_supported_versions_pass(version: tuple[int, ...]) -> None:
    assert compat.too_old(compat.Server("redis", version), "redis://h:6379/0") is None


def test_other_servers_number_their_own_releases() -> None:
    assert compat.too_old(compat.Server("fakeredis", (2, 41, 0)), "redis://h:6379/0") is None


def test_the_embedded_development_broker_passes_the_check() -> None:
    with DevBroker(port=0) as broker:
        app = TaskForge("dev", broker=broker.url)
        app.broker.ping()
        assert app.send("anything").status() is JobState.PENDING


def test_a_server_below_the_minimum_is_named_with_both_versions() -> None:
    error = compat.too_old(compat.Server("redis", (6, 0, 20)), "redis://h:6379/0")
    assert error is not None and "redis 6.0.20" in str(error) and "6.2" in str(error)


def test_unknown_command_wordings() -> None:
    assert compat.unknown_command("unknown command `BLMOVE`, with args beginning with: `k`, ") == "blmove"
    assert compat.unknown_command("unknown command 'BLMOVE', with args beginning with: 'k' ") == "blmove"
    assert compat.unknown_command("WRONGTYPE Operation against a key") is None


class OldServer:
    """A loopback stand-in for Redis 6.0: PING, HELLO with its version, and BLMOVE unknown.

    No server older than 6.2 comes bundled in a wheel, and the check must be
    seen refusing one end to end, through redis-py's connection handshake.
    """

    def __init__(self, version: bytes | None) -> None:
        self.version = version  # None: a server that predates HELLO
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.2)  # accept() wakes to notice stop()
        self.stopped = threading.Event()
        self.port = self.sock.getsockname()[1]
        self.thread = threading.Thread(target=self.serve, daemon=True)

    def serve(self) -> None:
        while not self.stopped.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(1)  # the test's client goes idle: let the thread end
                try:
                    while data := conn.recv(65536):
                        conn.sendall(self.reply(data))
                except OSError:
                    pass

    def reply(self, request: bytes) -> bytes:
        if request.upper().endswith(b"PING\r\n"):  # redis-py's health check
            return b"+PONG\r\n"
        if b"HELLO" not in request.upper():
            return b"-ERR unknown command `BLMOVE`\r\n"
        if self.version is None:
            return b"-ERR unknown command `HELLO`\r\n"
        proto = b"3" if b"$1\r\n3" in request else b"2"  # the protocol redis-py asked for
        fields = b"+server\r\n+redis\r\n+version\r\n+%s\r\n+proto\r\n:%s\r\n" % (self.version, proto)
        return (b"%3\r\n" if proto == b"3" else b"*6\r\n") + fields


@pytest.fixture
def old_server() -> Iterator[OldServer]:
    server = OldServer(b"6.0.20")
    server.thread.start()
    yield server
    server.stopped.set()
    server.thread.join(timeout=10)
    server.sock.close()


def test_a_server_older_than_the_minimum_is_refused_at_the_first_connection(old_server: OldServer) -> None:
    app = TaskForge("old", broker=f"redis://127.0.0.1:{old_server.port}/0")
    with pytest.raises(ConfigurationError) as caught:
        app.broker.ping()
    assert "redis 6.0.20" in str(caught.value) and "Redis 6.2" in str(caught.value), caught.value


def test_a_server_without_hello_is_refused_too(old_server: OldServer) -> None:
    old_server.version = None  # redis-py's own RESP3 handshake meets the unknown HELLO first
    with pytest.raises(ConfigurationError, match=r"[`']HELLO[`'].*Redis 6\.2"):  # redis-py quotes it either way
        TaskForge("old", broker=f"redis://127.0.0.1:{old_server.port}/0").broker.ping()
