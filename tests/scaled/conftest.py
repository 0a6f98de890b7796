"""Workers running ``scaledapp``; the Redis Cluster and Sentinel sets are tests/conftest.py's.

The servers start once per test run (about 2 s for the cluster, well under
for Sentinel), in one xdist worker that runs every test using them (the
``redis-cluster-sentinel`` group); a test that kills a master restores the
node (it rejoins as a replica) before it ends.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import redis_tools_or_skip  # noqa: F401  (imported from here by other tests)
from tests.worker.conftest import Worker, stop_workers

from .load import QUEUES

HERE = Path(__file__).parent


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
