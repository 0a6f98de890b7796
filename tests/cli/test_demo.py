"""``taskforge demo``: the whole loop in one command, in time, leaving no process behind."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.worker.conftest import group_pids, wait_for

pytestmark = pytest.mark.slow


def gone(pid: int) -> bool:
    """No such process, or only a zombie (nobody is left to run)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat[stat.rindex(")") + 2] == "Z"


def start_demo(tmp_path: Path) -> tuple[subprocess.Popen[bytes], Path]:
    log = tmp_path / "demo.log"
    env = {k: v for k, v in os.environ.items() if k != "TASKFORGE_BROKER_URL"}
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "taskforge", "demo"],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=tmp_path,
            env=env,
            start_new_session=True,
            # A run started in the background of a script inherits SIGINT ignored, and Python keeps
            # an ignored SIGINT: the demo gets Ctrl-C's default, as it has in a terminal.
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
    return proc, log


def assert_nothing_left(proc: subprocess.Popen[bytes], output: str) -> None:
    worker_pid = int(re.search(r"started \(pid (\d+)\)", output).group(1))  # type: ignore[union-attr]
    wait_for(
        lambda: not group_pids(proc.pid) and not group_pids(worker_pid) and gone(worker_pid),
        5,
        "every process of the demo and of its worker to exit",
    )


def test_demo_runs_the_whole_loop_in_time(tmp_path: Path) -> None:
    started = time.monotonic()
    proc, log = start_demo(tmp_path)
    try:
        code = proc.wait(30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    elapsed = time.monotonic() - started
    output = log.read_text()
    assert code == 0, output
    assert elapsed < 30, f"the demo took {elapsed:.1f} s"
    queued = int(re.search(r"queued (\d+) jobs", output).group(1))  # type: ignore[union-attr]
    assert queued >= 200 and f"{queued}/{queued} jobs finished" in output
    assert "QUEUE" in output and "WORKER" in output and "What just happened" in output
    row = next(line for line in output.splitlines() if line.startswith("default"))
    assert row.split()[1:12] == ["0"] * 10 + ["1"]  # nothing left but the one dead job
    assert "15 of 15 call_flaky_api jobs" in output and "is dead:" in output and "send_reminder" in output
    assert_nothing_left(proc, output)


def test_interrupted_demo_stops_worker_and_broker(tmp_path: Path) -> None:
    proc, log = start_demo(tmp_path)
    try:
        # As soon as the jobs are queued: the run that follows lasts over 2 s (a job is
        # scheduled 2 s ahead), a wider window than waiting for the first progress line.
        wait_for(lambda: "queued " in log.read_text(), 20, "the jobs to be queued")
        proc.send_signal(signal.SIGINT)
        code = proc.wait(20)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    output = log.read_text()
    assert code == 130, output
    assert "interrupted" in output and "Traceback" not in output
    assert_nothing_left(proc, output)
