"""What a real worker writes to stderr: the banner, failures at the right level, outages, the job of each line.

One worker per scenario, its whole log read at the end. The banner and the
outage run against a private password-protected redis-server, so the tests
also see that the password never reaches the log.
"""

from __future__ import annotations

import re
import signal
import subprocess
import time
from pathlib import Path

import pytest
import redis

from taskforge import JobState, TaskForge

from .conftest import free_port, wait_for

pytestmark = [pytest.mark.redis, pytest.mark.slow]

PASSWORD = "h0rse-battery-staple"
OUTAGE = 5.0  # seconds the private Redis stays down
DURABLE = ("--save", "", "--appendonly", "yes", "--appendfsync", "always")
LINE = re.compile(r"^\S+ \S+ (?P<level>[A-Z]+) \[(?P<who>[^\]]+)\] (?P<text>.*)$")


class PrivateRedis:
    """A redis-server of one test's own, with a password, that can be stopped and started on its port."""

    def __init__(self, directory: Path, *settings: str) -> None:
        """``settings``: the server's persistence and memory options (default: AOF, fsync on every write)."""
        self.port = free_port()
        self.url = f"redis://:{PASSWORD}@127.0.0.1:{self.port}/0"
        self.argv = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--requirepass", PASSWORD]
        self.argv += [*(settings or DURABLE), "--dir", str(directory)]
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(self.argv, stdout=subprocess.DEVNULL)
        client = redis.Redis(port=self.port, password=PASSWORD)
        wait_for(lambda: pings(client), 10, f"redis-server on port {self.port}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)


def pings(client: redis.Redis) -> bool:
    try:
        return bool(client.ping())
    except redis.ConnectionError:
        return False


@pytest.fixture
def private_redis(tmp_path: Path):
    server = PrivateRedis(tmp_path)
    server.start()
    yield server
    server.stop()


def lines(output: str) -> list[dict[str, str]]:
    """The log records of a worker's output (banner continuation lines excluded)."""
    return [m.groupdict() for m in map(LINE.match, output.splitlines()) if m]


def finished(handle, timeout: float = 30) -> JobState:
    return wait_for(lambda: handle.status() if handle.status().finished else None, timeout, f"{handle.id} to end")


def test_banner_retry_backoff_and_job_context(start_worker, private_redis: PrivateRedis) -> None:
    worker = start_worker("-c", "1", "-t", "2", "--grace", "7", url=private_redis.url, app="logapp:app")
    producer = TaskForge("producer", broker=private_redis.url)
    flaky = producer.send("logapp.flaky", "b")
    chatty = producer.send("logapp.chatty", "hello")
    assert chatty.result(timeout=30) == "hello"
    assert finished(flaky) is JobState.DEAD
    wait_for(lambda: f"job {flaky.id} attempt 2/2" in worker.output(), 10, "the last attempt's line")
    worker.signal(signal.SIGTERM)
    assert worker.wait(30) == 0
    output = worker.output()
    assert PASSWORD not in output

    banner = output[output.index("taskforge ") :].splitlines()
    assert re.match(
        r"taskforge \d+\.\d+\.\d+\S* worker \S+ \(pid \d+\) starts its children on queues default$", banner[0]
    )
    facts = dict(re.match(r"  (\w+):\s+(.*)$", line).groups() for line in banner[1:8])
    assert facts["broker"] == f"redis://:***@127.0.0.1:{private_redis.port}/0"
    assert facts["app"] == "logapp (logapp:app)" and facts["queues"] == "default"
    assert facts["children"] == "1 (-c), 2 lanes each (-t): 2 jobs at once"
    assert facts["grace"].startswith("7 s") and facts["visibility"].startswith("60 s")
    assert facts["periodic"].startswith("on")
    assert banner[8] == "  tasks (4):"
    tasks = [line.strip() for line in banner[9:13]]
    assert tasks == [f". logapp.{name} [default]" for name in ("chatty", "doomed", "flaky", "too_slow")]

    records = lines(output)
    retry = [r for r in records if f"job {flaky.id} attempt 1/2" in r["text"]]
    assert len(retry) == 1 and retry[0]["level"] == "INFO", retry
    assert re.search(
        r"failed after 0\.\d{3} s \(ValueError: flaky b failed\); retrying in 1\.75 s$", retry[0]["text"]
    ), retry
    said = [r for r in records if r["text"].endswith("the task says hello")]
    assert len(said) == 1 and said[0]["text"] == f"logapp.chatty[{chatty.id}]: the task says hello", said
    assert said[0]["level"] == "INFO" and said[0]["who"].startswith("child 0 pid ")
    assert not any(f"[{flaky.id}]" in r["text"] for r in records if "attempt" in r["text"]), "no tag outside a task"


def test_warning_level_shows_every_dead_job_and_no_retry(start_worker, redis_url: str, monkeypatch) -> None:
    monkeypatch.setenv("TASKFORGE_LOG_JOB_CONTEXT", "0")
    worker = start_worker("-c", "1", "--log-level", "warning", url=redis_url, app="logapp:app")
    producer = TaskForge("producer", broker=redis_url)
    jobs = {
        "exception": producer.send("logapp.doomed", "a"),
        "retried": producer.send("logapp.flaky", "c"),
        "timeout": producer.send("logapp.too_slow"),
        "unknown": producer.send("logapp.nosuch"),
    }
    for handle in jobs.values():
        assert finished(handle) is JobState.DEAD
    quiet = producer.send("logapp.chatty", "quietly")
    assert quiet.result(timeout=30) == "quietly"
    errors = {
        "exception": "(RuntimeError: doomed a failed); the job is dead",
        "retried": "(ValueError: flaky c failed); the job is dead",
        "timeout": "(TimeoutError: the job ran longer than its timeout of 1 s and was killed); the job is dead",
        "unknown": "(UnknownTask: ",
    }
    for cause, handle in jobs.items():
        wait_for(lambda h=handle: f"job {h.id}" in worker.output(), 10, f"the {cause} job's line")
    wait_for(lambda: "the task warns quietly" in worker.output(), 10, "the task's warning")
    worker.signal(signal.SIGTERM)
    assert worker.wait(30) == 0
    records = lines(worker.output())
    for cause, handle in jobs.items():
        said = [r for r in records if f"job {handle.id} " in r["text"]]
        assert len(said) == 1 and said[0]["level"] == "ERROR" and errors[cause] in said[0]["text"], (cause, said)
    assert {r["level"] for r in records} <= {"WARNING", "ERROR"}, "nothing at INFO: no banner, no retry line"
    warned = [r for r in records if r["text"].endswith("the task warns quietly")]
    assert [r["text"] for r in warned] == ["the task warns quietly"], "opted out: no job tag"


def test_an_outage_is_said_once_then_with_backoff_then_its_end(start_worker, private_redis: PrivateRedis) -> None:
    worker = start_worker("-c", "1", "--no-periodic", url=private_redis.url, app="logapp:app")
    producer = TaskForge("producer", broker=private_redis.url)
    assert producer.send("logapp.chatty", "before").result(timeout=30) == "before"
    before = len(worker.output())
    private_redis.stop()
    wait_for(lambda: worker.output().count("unreachable (") >= 2, 30, "both processes to see the outage")
    time.sleep(OUTAGE)
    private_redis.start()
    wait_for(lambda: worker.output().count("reconnected to ") >= 2, 30, "both processes to reconnect")
    after = producer.send("logapp.chatty", "after")
    assert after.result(timeout=30) == "after"
    worker.signal(signal.SIGTERM)
    assert worker.wait(30) == 0
    output = worker.output()
    assert PASSWORD not in output
    shown = f"redis://:***@127.0.0.1:{private_redis.port}/0"
    records = lines(output[before:])
    by_process: dict[str, list[dict[str, str]]] = {}
    for record in records:
        if "unreachable" in record["text"] or record["text"].startswith("reconnected"):
            by_process.setdefault(record["who"], []).append(record)
    others = [r for r in records if r["level"] != "INFO" and "unreachable" not in r["text"]]
    assert [r["text"] for r in others] == [f"logapp.chatty[{after.id}]: the task warns after"], "no other complaint"
    assert len(by_process) == 2, by_process  # the supervisor and its child, each for itself
    for who, said in by_process.items():
        texts = [r["text"] for r in said]
        assert texts[0] == f"broker {shown} unreachable (ConnectionError); retrying", (who, texts)
        assert re.fullmatch(rf"reconnected to {re.escape(shown)} after \d+\.\d s", texts[-1]), (who, texts)
        reminders = texts[1:-1]
        assert all(
            re.fullmatch(rf"broker {re.escape(shown)} still unreachable after \d+ s \(ConnectionError\)", t)
            for t in reminders
        ), (who, texts)
        assert len(reminders) <= 3, (who, texts)  # reminders 2, 4, 8 s apart: at most three in ~12 s
    assert all(len(line) < 160 for line in output[before:].splitlines()), "short lines"
