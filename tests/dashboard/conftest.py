"""A real worker, a real ``taskforge dashboard`` process and Debian's Chromium, driven by Playwright.

Nothing here downloads a browser: Chromium comes from apt (``.ci/run``
installs it), and Playwright only drives it. Without it the browser tests
skip locally and fail under CI=true, so a green CI means they ran. Screenshots go to
``$TASKFORGE_SCREENSHOTS`` when set, else to a directory under pytest's
temp path; both are kept as test artifacts.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from taskforge import TaskForge
from tests.conftest import admin_url

from ..conftest import skip_or_fail
from ..worker.conftest import Worker, stop, wait_for

HERE = Path(__file__).parent
# TASKFORGE_CHROMIUM points elsewhere; test_browser_missing.py uses it to check that,
# under CI, a missing browser fails the browser tests instead of skipping them.
CHROMIUM = os.environ.get("TASKFORGE_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def http(url: str, data: bytes | None = None, headers: dict[str, str] | None = None) -> tuple[int, str, Any]:
    """(status, body, headers) of one request; never raises for an HTTP error status, never follows redirects."""

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: Any, **kwargs: Any) -> None:
            return None

    opener = urllib.request.build_opener(NoRedirect)
    request = urllib.request.Request(url, data=data, headers=headers or {})
    try:
        with opener.open(request, timeout=15) as response:
            return response.status, response.read().decode(), response.headers
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(), exc.headers


class Dashboard:
    """One ``taskforge dashboard`` command on a free port."""

    def __init__(self, cwd: Path, url: str, args: list[str], log: Path) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        env = {**os.environ, "TASKFORGE_BROKER_URL": url, "SIDE_REDIS": admin_url(url), "PYTHONUNBUFFERED": "1"}
        env.pop("TASKFORGE_DASHBOARD_AUTH", None)
        self.log_path = log
        self.log = log.open("ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "taskforge", "dashboard", "dashapp:app", "--port", str(self.port), *args],
            cwd=cwd,
            env=env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        wait_for(self.answers, 30, f"the dashboard on port {self.port}", interval=0.1)

    def answers(self) -> bool:
        if self.proc.poll() is not None:
            raise AssertionError(f"the dashboard exited: {self.output()}")
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                return True
        except OSError:
            return False

    def output(self) -> str:
        self.log.flush()
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        self.log.close()


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    shutil.copy(HERE / "dashapp.py", tmp_path / "dashapp.py")
    return tmp_path


@pytest.fixture
def producer(redis_url: str) -> TaskForge:
    return TaskForge("producer", broker=redis_url)


@pytest.fixture
def start_dashboard(workdir: Path, redis_url: str) -> Iterator[Callable[..., Dashboard]]:
    started: list[Dashboard] = []

    def start(*args: str) -> Dashboard:
        board = Dashboard(workdir, redis_url, list(args), workdir / f"dashboard-{len(started)}.log")
        started.append(board)
        return board

    yield start
    for board in started:
        board.stop()


@pytest.fixture
def worker(workdir: Path, redis_url: str) -> Iterator[Worker]:
    """A real ``taskforge worker -c 2`` on the app's queues (not ``backlog``, left for paging)."""
    args = ["-c", "2", "-q", "default", "--no-periodic", "--grace", "2"]
    running = Worker(workdir, redis_url, args, workdir / "worker.log", app="dashapp:app")
    yield running
    leftovers = stop(running, timeout=20)
    assert not leftovers, f"processes outlived their worker: {leftovers}"


@pytest.fixture(scope="package")
def chromium() -> Iterator[Any]:
    """One Chromium for the browser tests, closed once they are done.

    Package scope, not session: Playwright's sync API leaves its event loop
    marked as running in the thread while it is open, so a later
    ``asyncio.run()`` in the same process (the async tests, which may follow
    in a parallel run's worker) would fail.
    """
    if not os.path.exists(CHROMIUM):
        skip_or_fail(f"no {CHROMIUM}: apt-get install chromium")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        skip_or_fail("playwright is not installed: pip install '.[test]'")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def screenshots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    chosen = os.environ.get("TASKFORGE_SCREENSHOTS")
    path = Path(chosen) if chosen else tmp_path_factory.mktemp("screenshots")
    path.mkdir(parents=True, exist_ok=True)
    return path
