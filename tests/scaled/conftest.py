"""Module-scoped Redis Cluster and Sentinel sets, and workers running ``scaledapp``.

The servers start once per test module (about 2 s for the cluster, well under
for Sentinel) and every test of the module shares them; a test that kills a
master restores the node (it rejoins as a replica) before it ends.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import skip_or_fail
from tests.worker.conftest import Worker, stop_workers

from .load import QUEUES
from .servers import Cluster, SentinelSet

HERE = Path(__file__).parent


def redis_tools_or_skip() -> None:
    missing = [tool for tool in ("redis-server", "redis-cli") if shutil.which(tool) is None]
    if missing:
        skip_or_fail(f"{' and '.join(missing)} not on PATH: the cluster and sentinel tests start their own")


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    redis_tools_or_skip()
    servers = Cluster()
    yield servers
    servers.stop()


@pytest.fixture(scope="module")
def sentinel() -> Iterator[SentinelSet]:
    redis_tools_or_skip()
    servers = SentinelSet()
    yield servers
    servers.stop()


@pytest.fixture
def start_worker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., Worker]]:
    """``start_worker(url, *args, durability=...)``: a ``taskforge worker scaledapp:app`` on every queue."""
    (tmp_path / "scaledapp.py").write_text((HERE / "scaledapp.py").read_text())
    started: list[Worker] = []

    def start(url: str, *args: str, durability: str = "async") -> Worker:
        monkeypatch.setenv("SCALED_DURABILITY", durability)
        queues = [arg for q in QUEUES for arg in ("-q", q)]
        worker = Worker(tmp_path, url, [*queues, *args], tmp_path / f"worker-{len(started)}.log", "scaledapp:app")
        started.append(worker)
        return worker

    yield start
    stop_workers(started, grace=20)
