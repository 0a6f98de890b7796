"""After ``kill -9`` of a whole worker, a worker on the same host takes its jobs back at once.

Without the rescue, the jobs wait out the dead worker's lease (60 s by
default); these tests keep that default and expect the rerun within seconds.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from typing import Any

import pytest

from taskforge import JobState, TaskForge
from taskforge.broker import workers
from taskforge.worker import identity

from .conftest import Worker, wait_for

pytestmark = [pytest.mark.redis, pytest.mark.slow]

RERUN_WITHIN = 15.0  # seconds: far under the 60 s lease, with room for a loaded machine


def listed(producer: TaskForge, worker: Worker, children: int = 1) -> dict[str, Any]:
    """The worker's listing once its heartbeat names its children (what proves them gone later)."""

    def entry() -> dict[str, Any] | None:
        for w in workers.live_workers(producer.broker.client):
            if w["pid"] == worker.pid and len(w["processes"]) >= 1 + children:
                return w
        return None

    return wait_for(entry, 30, f"worker {worker.pid} to list its children")  # type: ignore[return-value]


def kill_whole(worker: Worker) -> None:
    os.killpg(worker.pgid, signal.SIGKILL)
    worker.wait(10)


def test_a_killed_workers_job_reruns_within_seconds_when_a_worker_starts_on_the_same_host(
    start_worker, producer, side
) -> None:
    first = start_worker("-c", "1", "--grace", "1")  # the default 60 s lease
    handle = producer.send("userapp.sleepy", "s", 60)
    wait_for(lambda: side.llen("side:s:started"), 30, "the job to start")
    listed(producer, first)
    kill_whole(first)
    killed_at = time.monotonic()
    second = start_worker("-c", "1", "--grace", "1")
    wait_for(lambda: side.llen("side:s:started") >= 2, RERUN_WITHIN + 15, "the job to rerun")
    assert time.monotonic() - killed_at < RERUN_WITHIN + 15
    info = handle.info()
    assert (info.attempts, info.losses) == (1, 1)  # the lost run counts a loss, not an attempt, as any reclaim
    assert "is gone" in second.output() and "its 1 claimed jobs are taken back now" in second.output()
    # The dead worker leaves the listing at once.
    assert first.pid not in [w["pid"] for w in workers.live_workers(producer.broker.client)]


def test_a_restart_slower_than_the_listing_still_finds_the_killed_workers_job(start_worker, producer, side) -> None:
    """A service restart of 25 s: the dead worker is no longer listed as alive, yet its jobs are found at once."""
    first = start_worker("-c", "1", "--grace", "1")  # the default 60 s lease
    producer.send("userapp.sleepy", "late", 60)
    wait_for(lambda: side.llen("side:late:started"), 30, "the job to start")
    listed(producer, first)
    kill_whole(first)
    killed_at = time.monotonic()
    # The alive listing forgets it after 10 heartbeats (20 s): the restart comes later than that.
    wait_for(
        lambda: first.pid not in [w["pid"] for w in workers.live_workers(producer.broker.client)],
        40,
        "the dead worker to leave the listing of live workers",
        interval=1,
    )
    time.sleep(max(0.0, 25 - (time.monotonic() - killed_at)))
    started = time.monotonic()
    second = start_worker("-c", "1", "--grace", "1")
    wait_for(lambda: side.llen("side:late:started") >= 2, RERUN_WITHIN, "the job to rerun")
    assert time.monotonic() - killed_at < 60, "it waited out the lease"
    assert "is gone" in second.output(), second.output()
    assert time.monotonic() - started < RERUN_WITHIN


def test_a_running_worker_rescues_a_killed_neighbours_job(start_worker, producer, side) -> None:
    idle = start_worker("-c", "1", "--grace", "1", "-q", "other", "-q", "default")
    listed(producer, idle)
    busy = start_worker("-c", "1", "-q", "slow")
    handle = producer.task_for("userapp.sleepy").with_options(queue="slow").delay("n", 60)
    wait_for(lambda: side.llen("side:n:started"), 30, "the job to start")
    listed(producer, busy)
    kill_whole(busy)
    # The idle worker does not serve "slow": the job comes back in line there, for the next worker of it.
    wait_for(lambda: handle.info().state is JobState.PENDING, RERUN_WITHIN, "the job to come back in line")
    assert (handle.info().attempts, handle.info().losses) == (0, 1)  # a loss, its attempt refunded
    assert "is gone" in idle.output()


def test_a_frozen_worker_is_alive_and_keeps_its_jobs(start_worker, producer, side) -> None:
    """SIGSTOP stops the heartbeat and the renewals, but the processes exist: nothing is proved."""
    first = start_worker("-c", "1", "--grace", "1")
    handle = producer.send("userapp.sleepy", "f", 3)
    wait_for(lambda: side.llen("side:f:started"), 30, "the job to start")
    listed(producer, first)
    os.killpg(first.pgid, signal.SIGSTOP)
    try:
        second = start_worker("-c", "1", "--grace", "1")
        # The second worker's start-up rescue has run once its heartbeat is listed.
        wait_for(
            lambda: any(w["pid"] == second.pid for w in workers.live_workers(producer.broker.client)),
            30,
            "the second worker to start",
        )
        assert handle.info().state is JobState.RUNNING and side.llen("side:f:started") == 1
        assert "is gone" not in second.output()
    finally:
        os.killpg(first.pgid, signal.SIGCONT)
    wait_for(lambda: side.llen("side:f"), 30, "the frozen worker to finish its job")
    assert side.llen("side:f:started") == 1


# -- what proves a worker gone --------------------------------------------------


def entry_of(pids: list[int], **changes: str) -> dict[str, Any]:
    return {**identity.here(), "processes": [identity.process(pid) for pid in pids], **changes}


def ended_process() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


@pytest.mark.skipif(not identity.boot_id() or not identity.pid_namespace(), reason="needs Linux /proc")
def test_only_processes_that_no_longer_exist_on_this_boot_and_namespace_are_gone() -> None:
    gone = ended_process()
    dead = {**identity.here(), "processes": [[gone, 12345]]}
    assert identity.provably_gone(dead)
    assert not identity.provably_gone(entry_of([os.getpid()]))  # alive
    # A pid reused by another process has another start time: the recorded one is gone.
    reused = [[os.getpid(), (identity.start_time(os.getpid()) or 0) + 1]]
    assert identity.provably_gone({**identity.here(), "processes": reused})
    # One live process among the recorded ones: not gone.
    assert not identity.provably_gone({**identity.here(), "processes": [[gone, 5], identity.process(os.getpid())]})
    # Another host, boot or pid namespace (a container sharing the hostname): never judged.
    for field in ("host", "boot", "pidns"):
        assert not identity.provably_gone({**dead, field: "elsewhere"})
    # Nothing recorded, or a start time that could not be read: nothing proved.
    assert not identity.provably_gone({**identity.here(), "processes": []})
    assert not identity.provably_gone({**identity.here(), "processes": [[gone, 0]]})
    assert not identity.provably_gone(dead, {**identity.here(), "boot": ""})
