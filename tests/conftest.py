"""Shared fixtures: the same tests run on ``memory://`` and on a real Redis.

Locally a missing Redis skips the real-Redis half; under CI (CI=true) it is a
failure, so a green CI always means the suite ran against real Redis. Under
CI every other skip fails too (the report hooks below): every collected test
ran.

The suite runs in parallel: the hooks below start six pytest-xdist workers
unless ``-n`` says otherwise (see tests/parallel.py). Each xdist worker
process gets a Redis database of its own on the server of
``TASKFORGE_TEST_REDIS`` (unset, a ``redis-server`` the run starts on a free
port: tests/own_server.py): the Nth of ``TASKFORGE_TEST_REDIS_DBS`` (a comma
list; by default that URL's database, then the others from 15 down to 0,
skipping 10, the chaos test's side store). The worker puts its URL back into
``TASKFORGE_TEST_REDIS``, so every process a test starts inherits it (and
``TASKFORGE_TEST_REDIS_WORKER``, so that a pytest started by a test keeps
it). Run in one process (``-n0``), the suite uses ``TASKFORGE_TEST_REDIS``
as it is.

Tests that must share a process are grouped by tests/parallel.py: those of
the Redis Cluster and Sentinel sets (booted once per run, by the session
fixtures at the end of this file), the chaos run, and every module using a
module-scoped fixture of its own. The long groups are handed out first.
"""

from __future__ import annotations

import contextlib
import gc
import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

import pytest
import redis

from taskforge import TaskForge
from tests import own_server, parallel
from tests.scaled.servers import Cluster, SentinelSet

REDIS_VAR = "TASKFORGE_TEST_REDIS"
# The ACL-only run (tests/servers/acl_run.py): TASKFORGE_TEST_REDIS names the minimal ACL user, this
# variable an admin of the same server (``redis://:ADMINPASS@host:port``), which the fixtures flush
# and inspect with, so that every command the code under test sends goes through the minimal user.
ADMIN_VAR = "TASKFORGE_TEST_ADMIN_REDIS"
DBS_VAR = "TASKFORGE_TEST_REDIS_DBS"
CHAOS_SIDE_DB = 10  # tests/chaos records its runs there (CHAOS_SIDE_REDIS): never a worker's database
# Unless told a server, the run starts its own (tests/own_server.py): in the controller, before
# the xdist workers, which inherit its address; none of them starts another.
NO_SERVER = own_server.start(REDIS_VAR, "CHAOS_SIDE_REDIS")
BASE_REDIS_URL = os.environ.get(REDIS_VAR, "redis://127.0.0.1:1/15")  # port 1: nothing answers, the tests skip
R = TypeVar("R", pytest.TestReport, pytest.CollectReport)
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def database_of(url: str) -> int:
    path = urlsplit(url).path.strip("/")
    return int(path) if path else 0


def worker_databases(base_url: str = BASE_REDIS_URL) -> list[int]:
    """The databases the xdist workers use, in worker order (gw0 takes the first)."""
    chosen = os.environ.get(DBS_VAR, "").strip()
    if chosen:
        try:
            dbs = [int(part) for part in chosen.split(",") if part.strip()]
        except ValueError:
            raise pytest.UsageError(f"{DBS_VAR}={chosen!r}: expected database numbers, e.g. 0,1,2,3") from None
        if not dbs or len(set(dbs)) != len(dbs) or min(dbs) < 0:
            raise pytest.UsageError(f"{DBS_VAR}={chosen!r}: expected distinct database numbers, e.g. 0,1,2,3")
        return dbs
    base = database_of(base_url)
    return [base, *(db for db in range(15, -1, -1) if db not in (base, CHAOS_SIDE_DB))]


def worker_url(base_url: str, worker: str | None) -> str:
    """The test Redis of one xdist worker (``gw3``), or ``base_url`` itself outside xdist."""
    if not worker:
        return base_url
    index = int(worker.removeprefix("gw"))
    dbs = worker_databases(base_url)
    if index >= len(dbs):
        raise pytest.UsageError(f"xdist worker {worker} has no database: {DBS_VAR} lists {len(dbs)}; use -n {len(dbs)}")
    parts = urlsplit(base_url)
    if parts.scheme not in ("redis", "rediss"):
        raise pytest.UsageError(f"{REDIS_VAR}={base_url!r}: a parallel run needs a redis:// or rediss:// URL (or -n0)")
    return urlunsplit(parts._replace(path=f"/{dbs[index]}"))


def current_worker() -> str | None:
    """The xdist worker this process is; None outside xdist and in a process a worker's test started.

    Such a process (a pytest run by a test) inherits the worker's variables:
    its database is already the one in TASKFORGE_TEST_REDIS.
    """
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if not worker or os.environ.get(PINNED_VAR) == f"{os.environ.get('PYTEST_XDIST_TESTRUNUID')}:{worker}":
        return None
    return worker


PINNED_VAR = "TASKFORGE_TEST_REDIS_WORKER"  # set by a worker: its processes keep its database
_WORKER = current_worker()
REDIS_URL = worker_url(BASE_REDIS_URL, _WORKER)
if _WORKER:
    os.environ[REDIS_VAR] = REDIS_URL  # workers, CLIs and pythons the tests start use this database too
    os.environ[PINNED_VAR] = f"{os.environ.get('PYTEST_XDIST_TESTRUNUID')}:{_WORKER}"


def spare_redis_url(index: int) -> str:
    """A database no xdist worker of this run uses (the ``index``-th spare), else this worker's own.

    For a test that runs a whole other pytest (the Django suites under another Python): the
    workers that run leaves behind, if any outlives it, can then take no other test's jobs.
    Spares are counted from the end of the list: a worker xdist starts in place of a crashed
    one (``gw6`` of six) takes the next database from the front, never a spare that a run of
    the crashed worker may still be using.
    """
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0") or 0)
    dbs = worker_databases()
    position = len(dbs) - 1 - index
    parts = urlsplit(REDIS_URL)
    if not count or position < count or parts.scheme not in ("redis", "rediss"):
        return REDIS_URL
    return urlunsplit(parts._replace(path=f"/{dbs[position]}"))


def run_other_pytest(python: str, args: list[str], database: int, timeout: float) -> subprocess.CompletedProcess[str]:
    """Run a whole other pytest (the Django suites under another Python) on the ``database``-th spare.

    A database of its own: its workers never meet another test's jobs. Its own
    session and no stdin: nothing it starts can signal this xdist worker's
    process group or read the channel the worker is driven through (its stdin).
    Its output goes to files, not pipes, so a process it leaves behind cannot
    keep this call waiting; past ``timeout`` its whole session is killed and
    the test fails with what it printed (its ten slowest tests among it).
    """
    url = spare_redis_url(database)
    admin_client(url).flushdb()
    command = [python, "-m", "pytest", "--durations=10", *args]
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(
            command,
            cwd=Path(__file__).resolve().parents[1],
            env={**os.environ, "TASKFORGE_TEST_REDIS": url},
            stdout=out,
            stderr=err,
            text=True,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            code = proc.wait(timeout)
        except BaseException as exc:  # past the timeout, or this test's own (pytest-timeout)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            if not isinstance(exc, subprocess.TimeoutExpired):
                raise
            code = None
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    if code is None:
        pytest.fail(f"{' '.join(command)} did not end within {timeout:.0f} s:\n{stdout[-20_000:]}\n{stderr[-5_000:]}")
    return subprocess.CompletedProcess(command, code, stdout, stderr)


def skip_or_fail(reason: str) -> None:
    """Locally a missing service or tool skips; under CI it fails, so a green CI means every test ran."""
    if IN_CI:
        pytest.fail(f"under CI: {reason}")
    pytest.skip(reason)


def admin_url(url: str) -> str:
    """``url`` with the admin's credentials of an ACL-only run, else ``url`` itself: the tests' own housekeeping."""
    admin = os.environ.get(ADMIN_VAR)
    if not admin:
        return url
    parts, admin_parts = urlsplit(url), urlsplit(admin)
    if parts.scheme not in ("redis", "rediss") or "," in parts.netloc:
        return url  # a Cluster or Sentinel set of the test's own: no ACL user there
    if (parts.hostname, parts.port) != (admin_parts.hostname, admin_parts.port):
        return url  # a server of the test's own: no ACL user there
    return urlunsplit(parts._replace(netloc=admin_parts.netloc))


def admin_client(url: str | None = None, **options: Any) -> redis.Redis:
    """A client for what a test does beside taskforge (flush, inspect, damage keys), as the admin in an ACL-only run."""
    return redis.Redis.from_url(admin_url(url or REDIS_URL), **options)


_inspectors: dict[str, redis.Redis] = {}


def inspector(app: TaskForge) -> Any:
    """The client a test reads an app's keys with (TTLs, key lists): the app's own, or the admin's in an ACL-only run.

    The minimal user may run only what taskforge runs; a test's checks (``PTTL``,
    ``KEYS``, ``FLUSHDB``) are not that. One client per URL, closed at the end of the run.
    """
    url = app.broker.url
    if not os.environ.get(ADMIN_VAR) or not url.startswith(("redis://", "rediss://")):
        return app.broker.client
    if url not in _inspectors:
        _inspectors[url] = admin_client(url)
    return _inspectors[url]


def real_redis_or_skip() -> redis.Redis:
    client = admin_client(socket_connect_timeout=2)
    try:
        client.ping()
    except redis.ConnectionError as exc:
        skip_or_fail(NO_SERVER or f"no Redis at {REDIS_URL}: {exc}")
    return client


@pytest.fixture
def redis_url() -> Iterator[str]:
    """A clean real-Redis database for one test."""
    client = real_redis_or_skip()
    client.flushdb()
    yield REDIS_URL
    client.flushdb()
    client.close()


@pytest.fixture
def own_redis_url(tmp_path: Path) -> Iterator[str]:
    """A redis-server of this test's own, for a test that changes the whole server (``SCRIPT FLUSH``).

    The shared test server's other databases belong to the tests running beside it.
    """
    from tests.security.procs import PrivateRedis, Processes

    table = Processes(tmp_path)
    try:
        server = PrivateRedis(table)
        server.start(lambda: redis.Redis(port=server.port).ping())
        yield f"redis://127.0.0.1:{server.port}/0"
    finally:
        # The test's apps often sit in reference cycles: collect them (their connections close)
        # while the server still answers, not in some later test once it is gone.
        gc.collect()
        table.close()


@pytest.fixture(params=["memory", "redis"])
def broker_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """Each test using this runs twice: in-process fakeredis, then real Redis."""
    if request.param == "memory":
        yield "memory://"
        return
    yield request.getfixturevalue("redis_url")


@pytest.fixture
def app(broker_url: str) -> TaskForge:
    return TaskForge("tests", broker=broker_url)


# --- Parallel runs: how many workers, which tests share one, in which order (tests/parallel.py). ---


@pytest.hookimpl(wrapper=True)
def pytest_cmdline_main(config: pytest.Config) -> Iterator[None]:
    """A wrapper, to choose the workers before xdist reads the options."""
    if config.pluginmanager.hasplugin("xdist") and not hasattr(config, "workerinput"):
        parallel.choose_distribution(config, len(worker_databases()), DBS_VAR)
    return (yield)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    parallel.configure_node(node)


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    return parallel.make_scheduler(config, log)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    parallel.group_and_order(config, items)


def pytest_unconfigure(config: pytest.Config) -> None:
    for client in _inspectors.values():
        client.close()
    parallel.clean_up(config)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Under CI a skipped test fails, whatever skipped it (``skip_or_fail``, a ``skipif`` mark, an
    ``importorskip``): a green CI means every collected test ran. xfail marks are left alone."""
    return fail_a_skip_under_ci((yield))


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(
    collector: pytest.Collector,
) -> Generator[None, pytest.CollectReport, pytest.CollectReport]:
    """The same for a module skipped whole while collected (a module-level skip or ``importorskip``)."""
    return fail_a_skip_under_ci((yield))


def fail_a_skip_under_ci(report: R) -> R:
    """``report`` as a failure if it is a skip under CI."""
    if IN_CI and report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"skipped under CI ({reason}): under CI every test must run"
    return report


def redis_tools_or_skip() -> None:
    missing = [tool for tool in ("redis-server", "redis-cli") if shutil.which(tool) is None]
    if missing:
        skip_or_fail(f"{' and '.join(missing)} not on PATH: the cluster and sentinel tests start their own")


@pytest.fixture(scope="session")
def cluster() -> Iterator[Cluster]:
    """A Redis Cluster (three masters, a replica each), booted once per run; its tests share one xdist worker.

    A test that kills a master restores the node (it rejoins as a replica) before it ends.
    """
    redis_tools_or_skip()
    servers = Cluster()
    yield servers
    servers.stop()


@pytest.fixture(scope="session")
def sentinel() -> Iterator[SentinelSet]:
    """A master, a replica and three sentinels, booted once per run, like ``cluster``."""
    redis_tools_or_skip()
    servers = SentinelSet()
    yield servers
    servers.stop()
