"""SIGHUP is a warm restart, and --max-memory-per-child replaces a child that leaked: real workers, real Redis.

Before, SIGHUP's default action killed the supervisor at once, with no log
line, and its running ``max_attempts=1`` jobs ended dead as WorkerLost.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from click.testing import CliRunner

from taskforge import JobState
from taskforge.cli.worker import worker as worker_command

from .conftest import final, wait_for

pytestmark = [pytest.mark.redis, pytest.mark.slow]

HUP_APP = """
import os, time
import redis
from taskforge import TaskForge

app = TaskForge("hupapp")
side = redis.Redis.from_url(os.environ["SIDE_REDIS"])
LEAKED = []


@app.task(max_attempts=1)
def hold(key, seconds):
    side.rpush(f"side:{key}:started", os.getpid())
    time.sleep(seconds)
    return os.getpid()


@app.task(max_attempts=1)
def leak(key, mb):
    LEAKED.append(b"x" * (mb * 1024 * 1024))  # written, so resident
    side.rpush(f"side:{key}", os.getpid())
    time.sleep(1.2)  # the child checks its memory every second: it sees this run's leak before the next run
    return len(LEAKED)
"""


@pytest.fixture
def hupapp(workdir: Path) -> str:
    (workdir / "hupapp.py").write_text(HUP_APP)
    return "hupapp:app"


def job_children(worker, n: int) -> set[int]:
    """The worker's child processes that run jobs (multiprocessing's resource tracker is not one)."""

    def running_jobs() -> set[int]:
        pids = {p for p in worker.children() if b"resource_tracker" not in cmdline(p)}
        return pids if len(pids) == n else set()

    return wait_for(running_jobs, 30, f"{n} children of worker {worker.pid}")  # type: ignore[return-value]


def cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def running_hold(producer, side, key: str, seconds: float):
    """A max_attempts=1 job, once it runs."""
    handle = producer.send("hupapp.hold", key, seconds)
    wait_for(lambda: side.llen(f"side:{key}:started"), 30, "the job to start")
    return handle


def hup_logged(worker) -> None:
    wait_for(lambda: "received SIGHUP: warm restart" in worker.output(), 20, "the supervisor to log the SIGHUP")


def restart_and_check(worker, producer, side, send_hup) -> None:
    """A max_attempts=1 job runs through a SIGHUP; the children are replaced, the supervisor stays."""
    before = job_children(worker, 2)
    helpers = set(worker.children()) - before  # multiprocessing's resource tracker: it must outlive a SIGHUP too
    handle = running_hold(producer, side, "h", 4)
    send_hup()
    hup_logged(worker)
    send_hup()  # a second one during the restart does not double it
    assert final(handle, 60) is JobState.SUCCEEDED
    info = handle.info()
    assert info.attempts == 1 and info.result in before
    wait_for(lambda: "warm restart done" in worker.output(), 30, "the restart to end")
    after = job_children(worker, 2)
    assert before.isdisjoint(after), (before, after)
    assert worker.proc.poll() is None and helpers <= set(worker.children()), (helpers, worker.children())
    out = worker.output()
    assert out.count("received SIGHUP: warm restart") == 1, out
    assert "received SIGHUP during a warm restart: ignored" in out, out
    assert out.count("warm restart done") == 1, out
    assert "starting a new one" not in out, out  # no child crashed
    # The new children serve: a job runs on one of them.
    assert producer.send("hupapp.hold", "next", 0).result(timeout=30) in after


def test_sighup_restarts_the_children_and_the_running_job_succeeds(start_worker, hupapp, producer, side) -> None:
    worker = start_worker("-c", "2", "--visibility-timeout", "1", app=hupapp)
    restart_and_check(worker, producer, side, lambda: worker.signal(signal.SIGHUP))


def test_sighup_to_the_whole_group_kills_no_child(start_worker, hupapp, producer, side) -> None:
    # A closing terminal sends SIGHUP to every process of the group: children ignore it, the supervisor restarts them.
    worker = start_worker("-c", "2", "--visibility-timeout", "1", app=hupapp)
    restart_and_check(worker, producer, side, lambda: os.killpg(worker.pgid, signal.SIGHUP))


def test_sighup_then_sigterm_stops_cleanly(start_worker, hupapp, producer, side) -> None:
    worker = start_worker("-c", "1", app=hupapp)
    job_children(worker, 1)
    handle = running_hold(producer, side, "t", 2)
    worker.signal(signal.SIGHUP)
    hup_logged(worker)
    worker.signal(signal.SIGTERM)
    assert worker.wait(60) == 0
    assert handle.status() is JobState.SUCCEEDED


def test_max_memory_per_child_replaces_a_child_that_leaked(start_worker, hupapp, producer, side) -> None:
    handles = [producer.send("hupapp.leak", "leak", 20) for _ in range(8)]
    worker = start_worker("-c", "1", "--max-memory-per-child", "110", "--burst", app=hupapp)
    assert worker.wait(120) == 0
    assert all(h.status() is JobState.SUCCEEDED for h in handles)
    pids = [int(p) for p in side.lrange("side:leak", 0, -1)]
    assert len(pids) == 8
    out = worker.output()
    assert "passed --max-memory-per-child 110 MB" in out, out
    # 8 runs of 20 MB would take one child far past 110 MB: it was replaced on the way, more than once.
    assert len(set(pids)) >= 2, pids
    assert max(pids.count(p) for p in set(pids)) < 6, pids
    assert "starting a new one" not in out, out  # replaced, not crashed


@pytest.mark.parametrize("value", ["junk", "-1", "1.5", str(1 << 31)])
def test_max_memory_per_child_refuses_junk(value: str) -> None:
    result = CliRunner().invoke(worker_command, ["some:app", "--max-memory-per-child", value])
    assert result.exit_code == 2 and "Invalid value for '--max-memory-per-child'" in result.output, result.output
