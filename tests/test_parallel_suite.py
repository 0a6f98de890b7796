"""How the parallel suite gives each xdist worker its own database (tests/conftest.py, tests/parallel.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import redis

from tests.conftest import CHAOS_SIDE_DB, worker_databases, worker_url

ROOT = Path(__file__).resolve().parents[1]


def test_by_default_the_urls_database_comes_first_and_the_chaos_side_store_is_never_used(monkeypatch) -> None:
    monkeypatch.delenv("TASKFORGE_TEST_REDIS_DBS", raising=False)
    assert worker_databases("redis://127.0.0.1:6379/15") == [15, 14, 13, 12, 11, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0]
    assert worker_databases("redis://127.0.0.1:6379/3")[:3] == [3, 15, 14]
    assert CHAOS_SIDE_DB not in worker_databases("redis://127.0.0.1:6379/0")


def test_the_listed_databases_are_taken_in_worker_order(monkeypatch) -> None:
    monkeypatch.setenv("TASKFORGE_TEST_REDIS_DBS", "0, 1,2,7")
    assert worker_databases() == [0, 1, 2, 7]
    assert worker_url("redis://:pw@10.0.0.5:6380/15?socket_timeout=5", "gw3") == (
        "redis://:pw@10.0.0.5:6380/7?socket_timeout=5"
    )
    assert worker_url("redis://127.0.0.1:6379/15", None) == "redis://127.0.0.1:6379/15"
    with pytest.raises(pytest.UsageError, match="gw4 has no database"):
        worker_url("redis://127.0.0.1:6379/15", "gw4")


@pytest.mark.parametrize("listed", ["0,a", "1,1", "-1", ","])
def test_a_bad_list_is_a_usage_error_naming_the_variable(monkeypatch, listed: str) -> None:
    monkeypatch.setenv("TASKFORGE_TEST_REDIS_DBS", listed)
    with pytest.raises(pytest.UsageError, match="TASKFORGE_TEST_REDIS_DBS"):
        worker_databases()


def url_in(env: dict[str, str]) -> str:
    """REDIS_URL as tests/conftest.py sets it in a process with ``env``."""
    code = "import tests.conftest as c; print(c.REDIS_URL)"
    base = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_XDIST", "TASKFORGE_TEST_REDIS"))}
    done = subprocess.run(
        [sys.executable, "-c", code], env={**base, **env}, cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_a_process_started_by_a_workers_test_keeps_the_workers_database() -> None:
    told = {"TASKFORGE_TEST_REDIS": "redis://127.0.0.1:6379/15"}
    worker = {"PYTEST_XDIST_WORKER": "gw3", "PYTEST_XDIST_TESTRUNUID": "run1", "PYTHONPATH": str(ROOT), **told}
    assert url_in(worker) == "redis://127.0.0.1:6379/12"
    # What the worker exports to what its tests start: a pytest run by a test stays on database 12.
    exported = {"TASKFORGE_TEST_REDIS": "redis://127.0.0.1:6379/12", "TASKFORGE_TEST_REDIS_WORKER": "run1:gw3"}
    assert url_in({**worker, **exported}) == "redis://127.0.0.1:6379/12"
    # A worker of another run (a new run id) chooses again.
    assert url_in({**worker, **exported, "PYTEST_XDIST_TESTRUNUID": "run2"}) == "redis://127.0.0.1:6379/13"


def test_spare_databases_come_from_the_end_so_a_replaced_worker_never_takes_one() -> None:
    """xdist starts gw6 in place of a crashed worker of six; the crashed one's Django run may still use its spare."""
    code = (
        "import tests.conftest as c; "
        "print(c.spare_redis_url(0), c.spare_redis_url(1), c.worker_url(c.BASE_REDIS_URL, 'gw6'))"
    )
    base = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_XDIST", "TASKFORGE_TEST_REDIS"))}
    env = {"PYTEST_XDIST_WORKER": "gw0", "PYTEST_XDIST_TESTRUNUID": "r", "PYTEST_XDIST_WORKER_COUNT": "6"}
    env["TASKFORGE_TEST_REDIS"] = "redis://127.0.0.1:6379/15"
    done = subprocess.run(
        [sys.executable, "-c", code],
        env={**base, **env, "PYTHONPATH": str(ROOT)},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    spare0, spare1, replacement = done.stdout.split()
    assert (spare0, spare1) == ("redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/1")
    assert replacement == "redis://127.0.0.1:6379/8"  # [15, 14, 13, 12, 11, 9, 8, ...][6]


def test_untold_the_suite_starts_its_own_server_and_stops_it() -> None:
    """The README's test command never empties a database of the developer's own Redis on 6379."""
    code = (
        "import os, redis, tests.conftest as c; "
        "client = redis.Redis.from_url(c.REDIS_URL); client.set('here', 1); "
        "print(c.REDIS_URL, os.environ['CHAOS_SIDE_REDIS'], client.dbsize(), client.config_get('save')['save'] or '-')"
    )
    base = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_XDIST", "TASKFORGE_TEST_", "CHAOS_"))}
    done = subprocess.run(
        [sys.executable, "-c", code],
        env={**base, "PYTHONPATH": str(ROOT)},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    url, side, keys, save = done.stdout.split()
    port = urlsplit(url).port
    assert port not in (None, 6379) and url.endswith("/15") and keys == "1" and save == "-"
    assert side == f"redis://127.0.0.1:{port}/10"
    with pytest.raises(redis.ConnectionError):  # stopped when the process that started it ended
        redis.Redis(port=port, socket_connect_timeout=1).ping()
