"""The worker's process tree: children forked from a fork server, yet the supervisor's own.

The ``taskforge worker`` command forks a fork server once the app is
imported (``worker/forkserver.py``); it forks each child twice over, so the
child is reparented to the supervisor, a child subreaper. These tests hold
the tree to what the spawned children promised: the supervisor is each
child's parent (it reaps them, and they die with it), a killed child is
replaced, a warm restart spawns children that import the app afresh, and
the fork server itself never outlives the supervisor nor lingers unreaped.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest

from taskforge import JobState
from taskforge.worker.forkserver import process_state

from .conftest import child_pids, comm, final, wait_for

pytestmark = [
    pytest.mark.redis,
    pytest.mark.skipif(sys.platform != "linux", reason="the fork server needs Linux (subreaper, pidfd)"),
]


STRAY_APP = """
import os, subprocess, sys
import redis
from taskforge import TaskForge

app = TaskForge("strayapp")
side = redis.Redis.from_url(os.environ["SIDE_REDIS"])


@app.task(max_attempts=1, max_worker_losses=0)
def leave_behind(key):
    stray = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1)"])
    side.rpush(f"side:{key}", stray.pid)
    os._exit(3)  # the child dies first: its subprocess is reparented to the supervisor
"""


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_text(errors="replace")
    except OSError:
        return ""


def forked_children(worker, n: int) -> list[int]:
    def found() -> list[int]:
        pids = [p for p in worker.children() if comm(p) == "taskforge-child"]
        return pids if len(pids) == n else []

    return wait_for(found, 30, f"{n} forked children of worker {worker.pid}")  # type: ignore[return-value]


def test_children_are_forked_and_the_supervisor_is_their_parent(start_worker, producer, side) -> None:
    worker = start_worker("-c", "2")
    children = forked_children(worker, 2)
    server = worker.fork_server()
    assert server is not None and server not in children
    assert set(children) | {server} == set(child_pids(worker.pid))  # reparented: none is the server's child
    assert not child_pids(server)
    producer.send("userapp.record_pid", "p").result(timeout=30)
    assert int(side.lrange("side:p", 0, -1)[0]) in children


def test_a_killed_child_is_replaced_by_a_forked_one(start_worker, producer, side) -> None:
    worker = start_worker("-c", "1")
    (first,) = forked_children(worker, 1)
    os.kill(first, signal.SIGKILL)
    wait_for(lambda: first not in worker.children(), 20, "the killed child to be reaped")
    (second,) = forked_children(worker, 1)
    assert second != first and process_state(first) == ""  # reaped by the supervisor, not left a zombie
    producer.send("userapp.record_pid", "after").result(timeout=30)
    assert side.lrange("side:after", 0, -1) == [str(second).encode()]


def test_supervisor_sigkill_takes_the_fork_server_and_children_along(start_worker) -> None:
    from .conftest import group_pids

    worker = start_worker("-c", "2")
    children = forked_children(worker, 2)
    server = worker.fork_server()
    worker.signal(signal.SIGKILL)
    worker.wait(5)
    wait_for(lambda: not set(group_pids(worker.pgid)) & {server, *children}, 10, "the server and children to die")


def test_a_stop_reaps_the_fork_server(start_worker) -> None:
    worker = start_worker("-c", "1")
    forked_children(worker, 1)
    server = worker.fork_server()
    assert server is not None
    worker.signal(signal.SIGTERM)
    assert worker.wait(30) == 0
    assert process_state(server) == ""  # reaped before the supervisor exited: no zombie left behind


def test_a_warm_restart_closes_the_fork_server_and_spawns_afresh(start_worker, producer) -> None:
    worker = start_worker("-c", "1")
    (old,) = forked_children(worker, 1)
    server = worker.fork_server()
    assert server is not None
    worker.signal(signal.SIGHUP)
    wait_for(lambda: "warm restart done" in worker.output(), 30, "the restart to end")
    wait_for(lambda: process_state(server) == "", 10, "the fork server to be reaped")
    assert worker.proc.poll() is None and worker.fork_server() is None

    def spawned() -> list[int]:
        return [p for p in worker.children() if "spawn_main" in cmdline(p)]

    (new,) = wait_for(spawned, 30, "a spawned child in the slot")  # type: ignore[misc]
    assert new != old and final(producer.send("userapp.record", "r")) is JobState.SUCCEEDED


def test_a_process_a_job_left_behind_is_reaped_once_it_ends(start_worker, workdir, producer, side) -> None:
    (workdir / "strayapp.py").write_text(STRAY_APP)
    worker = start_worker("-c", "1", app="strayapp:app")
    forked_children(worker, 1)
    producer.send("strayapp.leave_behind", "s")
    stray = int(wait_for(lambda: side.lpop("side:s"), 30, "the job to start its subprocess"))  # type: ignore[arg-type]
    wait_for(lambda: stray in child_pids(worker.pid) or process_state(stray) == "", 10, "the stray to be adopted")
    # A subreaper that never reaped it would keep it a zombie for as long as the worker runs.
    wait_for(lambda: process_state(stray) == "", 15, f"the stray {stray} to end and be reaped")
    assert "reaped 1 process(es) a job left behind" in worker.output()
