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

from .conftest import child_pids, comm, final, process_state, wait_for

pytestmark = [
    pytest.mark.redis,
    pytest.mark.skipif(sys.platform != "linux", reason="the fork server needs Linux (subreaper, pidfd)"),
]


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
