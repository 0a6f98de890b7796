"""``taskforge broker``: a real worker and producer run through it, with no Redis at all."""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis

from taskforge import TaskForge
from tests.worker.conftest import USER_APP, Worker, group_pids, wait_for

pytestmark = pytest.mark.slow


class BrokerProcess:
    def __init__(self, tmp: Path, *args: str) -> None:
        self.log_path = tmp / f"broker-{len(list(tmp.glob('broker-*')))}.log"
        self.log = self.log_path.open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "taskforge", "broker", *args],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")

    def url(self) -> str:
        found = wait_for(
            lambda: re.search(r"Listening on (redis://\S+)", self.output()), 20, "the broker to print its URL"
        )
        return found.group(1)  # type: ignore[union-attr]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)
        self.log.close()


@pytest.fixture
def start_broker(tmp_path: Path) -> Iterator[Callable[..., BrokerProcess]]:
    started: list[BrokerProcess] = []

    def start(*args: str) -> BrokerProcess:
        started.append(BrokerProcess(tmp_path, *args))
        return started[-1]

    yield start
    for broker in started:
        broker.stop()


@pytest.fixture
def dev_worker(tmp_path: Path) -> Iterator[Callable[[str], Worker]]:
    """A real ``taskforge worker`` on the user app of the worker tests; SIDE_REDIS is the dev broker too."""
    (tmp_path / "userapp.py").write_text(USER_APP)
    workers: list[Worker] = []

    def start(url: str) -> Worker:
        workers.append(Worker(tmp_path, url, ["-c", "1"], tmp_path / "worker.log"))
        return workers[-1]

    yield start
    for worker in workers:
        try:
            if worker.proc.poll() is None:
                worker.signal(signal.SIGTERM)
                worker.wait(20)
            wait_for(lambda w=worker: not group_pids(w.pgid), 5, "the worker's children to exit")
        finally:
            worker.kill_group()


def test_worker_and_producer_run_a_job_through_it(start_broker, dev_worker) -> None:
    broker = start_broker("--port", "0")
    url = broker.url()
    banner = broker.output()
    assert "FOR DEVELOPMENT ONLY, NOT FOR PRODUCTION" in banner and "in-memory" in banner
    assert "slower than Redis" in banner and f"TASKFORGE_BROKER_URL={url}" in banner
    client = redis.Redis.from_url(url)
    assert client.ping()
    worker = dev_worker(url)
    producer = TaskForge("producer", broker=url)
    handle = producer.send("userapp.record", "through-dev-broker", 7)
    assert handle.result(timeout=30) == 7
    assert client.lrange("side:through-dev-broker", 0, -1) == [b"7"]
    worker.signal(signal.SIGTERM)
    assert worker.wait(20) == 0
    client.close()
    broker.proc.send_signal(signal.SIGINT)
    assert broker.proc.wait(10) == 0
    assert "broker stopped" in broker.output()


def test_sigterm_stops_it_with_exit_0(start_broker) -> None:
    broker = start_broker("--port", "0")
    redis.Redis.from_url(broker.url()).ping()
    broker.proc.send_signal(signal.SIGTERM)
    assert broker.proc.wait(10) == 0


def test_port_in_use_exits_1_with_one_line(start_broker) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        broker = start_broker("--port", str(port))
        assert broker.proc.wait(20) == 1
        lines = broker.output().strip().splitlines()
    assert len(lines) == 1 and f"127.0.0.1:{port}" in lines[0] and "in use" in lines[0]
