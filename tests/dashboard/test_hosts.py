"""The dashboard's safe defaults over plain HTTP: the allowed ``Host``, the ``Origin`` checks, and no open
dashboard on another address without ``--no-auth`` (docs/howto/dashboard.md, "Access")."""

from __future__ import annotations

import re
import socket
from urllib.parse import urlencode

import pytest

from taskforge import TaskForge

from .conftest import free_port, http
from .test_http import run_cli

pytestmark = [pytest.mark.redis, pytest.mark.slow]

AUTH = "Authorization: Basic b3BzOnB3"  # ops:pw
PATHS = ("/", "/workers", "/search", "/api/status", "/api/queues/default/depth", "/static/dashboard.js")


def token_of(board) -> tuple[str, dict[str, str]]:
    """The CSRF token a page hands out, and the cookie header that goes with it."""
    _, _, headers = http(board.base + "/")
    cookie = re.search(r"taskforge_csrf=(\w+)", headers["set-cookie"])[1]
    return cookie, {"Cookie": f"taskforge_csrf={cookie}"}


def test_a_rebound_name_gets_nothing_and_loopback_names_answer(start_dashboard, producer: TaskForge) -> None:
    producer.send("dashapp.add", 1, 2)
    board = start_dashboard()
    port = board.port
    for path in PATHS:
        # DNS rebinding: evil.example now resolves to 127.0.0.1; the browser names it in Host and Origin
        for headers in (
            {"Host": f"evil.example:{port}"},
            {"Host": f"evil.example:{port}", "Origin": f"http://evil.example:{port}"},
            {"Host": "evil.example"},
            {"Host": f"127.0.0.1.evil.example:{port}"},
            {"Host": f"localhost@evil.example:{port}"},
        ):
            status, body, _ = http(board.base + path, headers=headers)
            assert status == 400 and "--allow-host" in body, (path, headers, status, body[:200])
        for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"LOCALHOST.:{port}", f"[::1]:{port}", "127.0.0.2"):
            status, body, _ = http(board.base + path, headers={"Host": host})
            assert status == 200, (path, host, status, body[:200])
    cookie, jar = token_of(board)
    status, _, _ = http(
        f"{board.base}/queues/default/pause",
        urlencode({"csrf": cookie}).encode(),
        {**jar, "Host": f"evil.example:{port}", "Origin": f"http://evil.example:{port}"},
    )
    assert status == 400 and producer.paused() == set()


def test_allow_host_adds_names_and_auth_comes_after_the_host_check(start_dashboard, producer: TaskForge) -> None:
    board = start_dashboard("--allow-host", "ops.example.com", "--allow-host", "10.1.2.3", "--auth", "ops:pw")
    good = {"Authorization": "Basic b3BzOnB3"}  # ops:pw
    for host in ("ops.example.com", "OPS.example.com:9999", "10.1.2.3:80", f"localhost:{board.port}"):
        assert http(board.base + "/api/status", headers={**good, "Host": host})[0] == 200, host
        assert http(board.base + "/api/status", headers={"Host": host})[0] == 401, host
    status, body, headers = http(board.base + "/api/status", headers={**good, "Host": "evil.example"})
    assert status == 400 and "www-authenticate" not in headers  # never a password prompt for a rebound name
    # Behind a proxy: the page is https://ops.example.com, the proxy passes the request on with Host 127.0.0.1
    _, _, headers = http(board.base + "/", headers=good)
    cookie = re.search(r"taskforge_csrf=(\w+)", headers["set-cookie"])[1]
    jar = {**good, "Cookie": f"taskforge_csrf={cookie}"}
    pause, form = f"{board.base}/queues/default/pause", urlencode({"csrf": cookie}).encode()
    assert http(pause, form, {**jar, "Origin": "https://evil.example"})[0] == 403
    assert http(pause, form, {**jar, "Origin": "https://ops.example.com"})[0] == 303
    assert producer.paused() == {"default"}
    with socket.create_connection(("127.0.0.1", board.port), timeout=10) as sock:  # two Host headers: refused
        sock.sendall(f"GET /api/status HTTP/1.1\r\nHost: localhost\r\nHost: evil.example\r\n{AUTH}\r\n\r\n".encode())
        assert sock.recv(100).startswith(b"HTTP/1.1 400 ")
    assert "answering to Host: 10.1.2.3, 127.0.0.1, ::1, localhost, ops.example.com" in board.output()


def test_origin_null_and_other_origins_are_refused(start_dashboard, producer: TaskForge) -> None:
    board = start_dashboard()
    cookie, jar = token_of(board)
    pause = f"{board.base}/queues/default/pause"
    form = urlencode({"csrf": cookie}).encode()
    refused = [
        {"Origin": "null"},
        {"Origin": "NULL"},
        {"Origin": "http://evil.example"},
        {"Origin": f"http://localhost:{board.port + 1 if board.port < 65535 else 1}"},  # another origin of this host
        {"Origin": f"file://127.0.0.1:{board.port}"},
        {"Referer": "http://evil.example/page"},  # no Origin on a POST: the Referer decides
        {"Referer": "null"},
    ]
    for headers in refused:
        status, body, _ = http(pause, form, {**jar, **headers})
        assert status == 403, (headers, status, body[:200])
        assert producer.paused() == set(), headers
    for path in ("/api/status", "/api/jobs", "/"):
        status, body, _ = http(board.base + path, headers={"Origin": "null"})
        assert status == 403 and "null" in body, path
    status, _, _ = http(
        pause, form, {**jar, "Origin": f"http://localhost:{board.port}", "Host": f"localhost:{board.port}"}
    )
    assert status == 303 and producer.paused() == {"default"}
    status, _, _ = http(f"{board.base}/queues/default/resume", form, {**jar, "Referer": f"{board.base}/"})
    assert status == 303 and producer.paused() == set()


def test_another_address_needs_auth_or_no_auth(start_dashboard, workdir, redis_url: str) -> None:
    port = str(free_port())
    out = run_cli(workdir, redis_url, "dashboard", "dashapp:app", "--host", "0.0.0.0", "--port", port)
    assert out.returncode == 2, out.stderr
    assert "refusing to serve the dashboard on 0.0.0.0 without --auth" in out.stderr and "--no-auth" in out.stderr
    both = run_cli(workdir, redis_url, "dashboard", "dashapp:app", "--host", "0.0.0.0", "--auth", "a:b", "--no-auth")
    assert both.returncode == 2 and "contradict" in both.stderr
    for bad in ("http://ops.example.com", "ops.example.com:8080", "", "a/b", "*", "*.example.com"):
        out = run_cli(workdir, redis_url, "dashboard", "dashapp:app", "--allow-host", bad, "--port", port)
        assert out.returncode == 2 and "--allow-host" in out.stderr, (bad, out.stderr)
    board = start_dashboard("--host", "0.0.0.0", "--no-auth")
    assert "warning: --no-auth: anyone who reaches this address" in board.output()
    assert http(board.base + "/api/status")[0] == 200
    assert http(board.base + "/api/status", headers={"Host": "evil.example"})[0] == 400
