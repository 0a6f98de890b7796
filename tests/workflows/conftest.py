"""A real worker for a whole module, the test app bound to the same Redis, and polls that end.

One ``taskforge worker`` (two children) serves every queue the scenarios
use except ``wf-manual``, which the repair tests claim from by hand. The
database is flushed when the module starts and ends, never between its
tests: the worker lives across them, so each test keys its side records by
a token of its own.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import redis

from taskforge import TaskForge
from taskforge.broker import Broker
from taskforge.broker.connection import connect
from taskforge.testing import use_broker
from tests.conftest import admin_client

from ..conftest import REDIS_URL, real_redis_or_skip
from ..worker.conftest import Worker, stop_workers, wait_for
from . import wfapp

REPO = Path(__file__).resolve().parents[2]
APP_SPEC = "tests.workflows.wfapp:app"
RESULT_TIMEOUT = 30.0  # generous on a busy machine; a passing run waits far less

__all__ = ["APP_SPEC", "REPO", "RESULT_TIMEOUT", "Gate", "bound", "runs", "text", "wait_for"]


@contextmanager
def bound(app: TaskForge, url: str) -> Iterator[TaskForge]:
    """``app`` talking to ``url`` for a while, as a producer configured for it would."""
    broker = Broker(connect(url), url, int(app.retention * 1000), int(app.dead_retention * 1000))
    previous = use_broker(app, broker)
    try:
        yield app
    finally:
        use_broker(app, previous)
        broker.client.close()


def text(value: object) -> str:
    """A reply of redis-py (bytes, as the clients here do not decode) as text."""
    return value.decode() if isinstance(value, bytes) else str(value)


def runs(side: redis.Redis, key: str) -> list[str]:
    """What the app's recording tasks wrote under ``key``, in order."""
    return [text(item) for item in side.lrange(wfapp.side_key(key), 0, -1)]


@pytest.fixture(scope="module")
def module_redis() -> Iterator[str]:
    """The real test Redis, flushed for this module; skipped (or failed under CI) without one."""
    client = real_redis_or_skip()
    client.flushdb()
    yield REDIS_URL
    client.flushdb()
    client.close()


@pytest.fixture(scope="module")
def served() -> tuple[str, ...]:
    """The queues the module's worker serves; a module overrides it to serve fewer.

    A worker serving one queue claims its next job in the same round trip
    that records the last one, which is what a module running thousands of
    steps wants.
    """
    return wfapp.SERVED


@pytest.fixture(scope="module")
def worker(module_redis: str, served: tuple[str, ...], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Worker]:
    queues = [arg for queue in served for arg in ("-q", queue)]
    log = tmp_path_factory.mktemp("workflow-worker") / "worker.log"
    started = Worker(REPO, module_redis, ["-c", "2", "--log-level", "warning", *queues], log, app=APP_SPEC)
    try:
        started.wait_children(2, timeout=30)
    except AssertionError:
        stop_workers([started])
        raise AssertionError(f"the worker did not start:\n{started.output()}") from None
    yield started
    stop_workers([started])


@pytest.fixture(scope="module")
def live_app(module_redis: str, worker: Worker) -> Iterator[TaskForge]:
    """The test app as a producer on the worker's Redis."""
    with bound(wfapp.app, module_redis) as app:
        yield app


@pytest.fixture(scope="module")
def side(module_redis: str) -> Iterator[redis.Redis]:
    client = admin_client(module_redis)
    yield client
    client.close()


@pytest.fixture
def token() -> str:
    """A name no other test uses, for side records and gates."""
    return uuid.uuid4().hex[:12]


class Gate:
    """What a ``gated`` task waits on: the test sees it start, then lets it finish."""

    def __init__(self, side: redis.Redis, name: str) -> None:
        self.side = side
        self.name = name
        self.opened = False

    def wait_running(self, count: int = 1) -> None:
        key = wfapp.side_key(f"{self.name}:running")
        wait_for(lambda: self.side.llen(key) >= count, RESULT_TIMEOUT, f"{count} run(s) behind gate {self.name}")

    def open(self) -> None:
        self.side.rpush(wfapp.side_key(f"{self.name}:open"), "1")
        self.opened = True

    def order(self) -> list[str]:
        return runs(self.side, f"{self.name}:order")


@pytest.fixture
def gate(side: redis.Redis, token: str) -> Iterator[Gate]:
    """A gate for one test; opened afterwards if the test did not, so no child stays blocked."""
    made = Gate(side, f"gate-{token}")
    yield made
    if not made.opened:
        made.open()
