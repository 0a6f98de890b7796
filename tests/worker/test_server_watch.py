"""A Redis that can lose jobs, said where an operator looks: the worker's log, ``taskforge status``, the dashboard.

Each test starts its own ``redis-server`` on a free port with the settings
under test (eviction on; no persistence, restarted mid-run; AOF), a real
worker against it, and reads what each reader says.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from taskforge import TaskForge

from .conftest import free_port, wait_for
from .test_logs import LINE, PrivateRedis

pytestmark = [pytest.mark.redis, pytest.mark.slow]

NAP_APP = """
import time
from taskforge import TaskForge

app = TaskForge("napapp")


@app.task
def nap(seconds):
    time.sleep(seconds)
    return seconds


@app.task(rate_limit="10/s")
def limited():
    return 1
"""


@pytest.fixture
def server(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[PrivateRedis]:
    """A private redis-server (a password; stopped and started on its port) with the settings under test."""
    started = PrivateRedis(tmp_path, *request.param)
    started.start()
    yield started
    started.stop()


@pytest.fixture
def napapp(workdir: Path) -> str:
    (workdir / "napapp.py").write_text(NAP_APP)
    return "napapp:app"


def records(output: str) -> list[dict[str, str]]:
    return [m.groupdict() for m in map(LINE.match, output.splitlines()) if m]


def run_status(workdir: Path, url: str) -> str:
    env = {
        **os.environ,
        "TASKFORGE_BROKER_URL": url,
        "PYTHONPATH": f"{workdir}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
    }
    done = subprocess.run(
        [sys.executable, "-m", "taskforge", "status", "napapp:app"],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def dashboard_page(workdir: Path, url: str) -> str:
    port = free_port()
    env = {
        **os.environ,
        "TASKFORGE_BROKER_URL": url,
        "PYTHONPATH": f"{workdir}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "taskforge", "dashboard", "napapp:app", "--port", str(port)],
        cwd=workdir,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )

    def page() -> str | None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as response:
                return str(response.read().decode())
        except OSError:
            return None

    try:
        return str(wait_for(page, 30, "the dashboard to answer", interval=0.2))
    finally:
        proc.terminate()
        proc.wait(10)


EVICTING = ("--maxmemory-policy", "allkeys-lru", "--appendonly", "yes", "--save", "")
FORGETFUL = ("--save", "", "--appendonly", "no")
DURABLE = ("--appendonly", "yes", "--appendfsync", "always", "--save", "", "--maxmemory-policy", "noeviction")


@pytest.mark.parametrize("server", [EVICTING], indirect=True)
def test_eviction_is_warned_in_the_log_status_and_dashboard(
    server: PrivateRedis, start_worker, napapp: str, workdir: Path
) -> None:
    worker = start_worker("-c", "1", url=server.url, app=napapp)
    warned = wait_for(
        lambda: [r for r in records(worker.output()) if "maxmemory-policy allkeys-lru" in r["text"]],
        30,
        "the worker to warn about eviction",
    )
    assert [r["level"] for r in warned] == ["WARNING"]  # type: ignore[union-attr]
    assert "set maxmemory-policy noeviction" in warned[0]["text"]  # type: ignore[index]

    status = run_status(workdir, server.url)
    assert "redis: maxmemory-policy allkeys-lru, persistence AOF, 0 replicas" in status
    assert re.search(r"WARNING: Redis evicts keys .*allkeys-lru", status)

    page = dashboard_page(workdir, server.url)
    banner = re.search(r'<p class="banner server-warning"[^>]*>(.*?)</p>', page, re.S)
    assert banner and "maxmemory-policy allkeys-lru" in banner[1]


@pytest.mark.parametrize("server", [FORGETFUL], indirect=True)
def test_a_restart_that_lost_the_data_is_one_error_with_the_count(
    server: PrivateRedis, start_worker, napapp: str, workdir: Path
) -> None:
    worker = start_worker("-c", "1", "--visibility-timeout", "3", url=server.url, app=napapp)
    producer = TaskForge("producer", broker=server.url)
    handle = producer.send("napapp.nap", 10)
    wait_for(lambda: handle.status().value == "running", 30, "the job to start")
    assert any("no persistence" in r["text"] and r["level"] == "WARNING" for r in records(worker.output()))

    server.stop()  # no AOF, no RDB: it comes back empty
    server.start()
    wait_for(lambda: "restarted without its data" in worker.output(), 30, "the worker to see the restart")
    # The run ends (10 s: room for a loaded machine to see the restart first) and its outcome
    # meets no record; a few renewals pass meanwhile.
    wait_for(lambda: "its record is gone" in worker.output(), 30, "the run to end")
    output = worker.output()
    errors = [r["text"] for r in records(output) if r["level"] == "ERROR"]
    assert len(errors) == 1, errors
    assert "1 jobs this worker held are gone" in errors[0]
    for untrue in ("no longer holds its claim", "reclaimed", "took the job over", "lease expired"):
        assert untrue not in output, f"{untrue!r} logged after a restart that lost the job:\n{output}"
    # The worker's task limits went with the data: published again, for jobs sent by name.
    limits = redis.Redis.from_url(server.url)
    wait_for(lambda: limits.hexists("taskforge:{default}:limits", "napapp.limited"), 10, "the limits again")


@pytest.mark.parametrize("server", [DURABLE], indirect=True)
def test_a_durable_server_draws_no_warning(server: PrivateRedis, start_worker, napapp: str, workdir: Path) -> None:
    worker = start_worker("-c", "1", url=server.url, app=napapp)
    producer = TaskForge("producer", broker=server.url)
    assert producer.send("napapp.nap", 0).result(timeout=30) == 0  # the start-up check has run by now
    assert not [r for r in records(worker.output()) if r["level"] in ("WARNING", "ERROR")], worker.output()
    status = run_status(workdir, server.url)
    assert "redis: maxmemory-policy noeviction, persistence AOF, 0 replicas" in status
    assert "WARNING" not in status
    assert "server-warning" not in dashboard_page(workdir, server.url)


@pytest.mark.parametrize("server", [DURABLE], indirect=True)
def test_a_restart_that_kept_the_data_is_no_error(server: PrivateRedis, start_worker, napapp: str) -> None:
    worker = start_worker("-c", "1", "--visibility-timeout", "3", url=server.url, app=napapp)
    producer = TaskForge("producer", broker=server.url)
    handle = producer.send("napapp.nap", 4)
    wait_for(lambda: handle.status().value == "running", 30, "the job to start")
    server.stop()  # SIGTERM: Redis writes its AOF out, and reads it back at start
    server.start()
    assert handle.result(timeout=30) == 4
    output = worker.output()
    assert not [r for r in records(output) if r["level"] == "ERROR"], output
    assert "restarted without its data" not in output and "its record is gone" not in output
