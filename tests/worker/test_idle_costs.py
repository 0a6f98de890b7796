"""An idle worker's Redis traffic: one waiter per child, and slower housekeeping when nothing runs."""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any

import pytest

from taskforge.worker.child import Child
from taskforge.worker.housekeeping import (
    HEARTBEAT_EVERY,
    IDLE_AFTER,
    IDLE_HEARTBEAT_EVERY,
    IDLE_RECLAIM_EVERY,
    RECLAIM_EVERY,
    Activity,
    DamageLog,
    Housekeeping,
)
from taskforge.worker.lane import Lane
from taskforge.worker.outage import Outage


class FakeLane:
    def __init__(self) -> None:
        self.stopping = False


def bare_child() -> Child:
    """The waiting room of a child, without an app or a broker."""
    child = Child.__new__(Child)
    child.idle = threading.Condition(threading.Lock())
    child.waiter = None
    child.wakeups = 0
    child.resting = 0
    return child


def in_thread(child: Child, lane: FakeLane, answers: list[bool]) -> threading.Thread:
    thread = threading.Thread(target=lambda: answers.append(child.take_waiting(lane)), daemon=True)
    thread.start()
    return thread


def wait_resting(child: Child, n: int) -> None:
    with child.idle:
        assert child.idle.wait_for(lambda: child.resting == n, timeout=10), child.resting


def test_one_lane_waits_on_redis_the_others_locally() -> None:
    child = bare_child()
    first, second, third = FakeLane(), FakeLane(), FakeLane()
    assert child.take_waiting(first) is True
    answers: list[bool] = []
    threads = [in_thread(child, second, answers), in_thread(child, third, answers)]
    wait_resting(child, 2)  # both blocked locally: neither is a second waiter on Redis
    assert child.waiter is first and answers == []
    child.hand_on()  # the waiter found a job: exactly one resting lane goes to claim
    wait_resting(child, 1)
    assert answers == [False]
    child.leave_waiting()  # the waiter went to run its job: the other lane takes its place
    for thread in threads:
        thread.join(timeout=10)
    assert answers == [False, True]
    assert child.waiter in (second, third)


def test_a_resting_lane_sees_the_stop() -> None:
    child = bare_child()
    assert child.take_waiting(FakeLane())
    lane = FakeLane()
    answers: list[bool] = []
    thread = in_thread(child, lane, answers)
    wait_resting(child, 1)
    lane.stopping = True
    thread.join(timeout=10)
    assert answers == [False]


def test_hand_on_with_nobody_resting_leaves_no_stale_wakeup() -> None:
    child = bare_child()
    child.hand_on()
    assert child.wakeups == 0
    assert child.take_waiting(FakeLane()) is True


@pytest.mark.parametrize("more", [False, True])
def test_a_lane_woken_with_a_job_sends_a_sibling_to_claim_only_when_more_is_ready(more: bool) -> None:
    child = bare_child()
    woken = FakeLane()
    assert child.take_waiting(woken)
    answers: list[bool] = []
    thread = in_thread(child, FakeLane(), answers)
    wait_resting(child, 1)
    # What Lane.idle leaves after a wait that claimed a job, ``more`` as the claim's reply said.
    lane: Any = SimpleNamespace(child=child, woke_with_job=True, woke_with_more=more)
    Lane.hand_on_after_start(lane)  # the job started
    thread.join(timeout=10)
    # Either way the resting lane goes on; with nothing else ready it takes the waiter's
    # place (True), with more ready it goes to claim (False) and nobody waits on Redis.
    assert answers == [not more]
    assert (child.waiter is not None) is (not more) and child.wakeups == 0


def run_housekeeping(idle: bool, seconds: float) -> dict[str, int]:
    counts = {"renew": 0, "reclaim": 0, "beat": 0}

    def duty(name: str) -> Any:
        return lambda: counts.__setitem__(name, counts[name] + 1)

    keeping = Housekeeping(
        duty("renew"), duty("reclaim"), duty("beat"), None, 1.0, DamageLog(), Outage("redis://x"), idle=lambda: idle
    )
    keeping.start(0.0)
    now = 0.0
    while now < seconds:
        keeping.tick(now, stopping=False)
        now += 0.25
    return counts


def test_idle_housekeeping_runs_at_the_slow_rates() -> None:
    idle = run_housekeeping(idle=True, seconds=60)
    busy = run_housekeeping(idle=False, seconds=60)
    assert idle["reclaim"] <= 60 / IDLE_RECLAIM_EVERY + 1
    assert idle["beat"] <= 60 / IDLE_HEARTBEAT_EVERY + 1
    assert busy["reclaim"] >= 60 / RECLAIM_EVERY - 1
    assert busy["beat"] >= 60 / HEARTBEAT_EVERY - 1


def test_a_worker_finishing_jobs_is_busy_to_every_asker_each_tick() -> None:
    """A job finishes every 0.8 s; the supervisor ticks every 0.25 s and its reclaim asks again
    (for the sweeper): every reclaim runs each second and sees a busy worker; once the jobs stop,
    the worker turns idle after IDLE_AFTER seconds and reclaims at the slow rate."""
    clock = {"now": 0.0}
    done = {"jobs": 0}
    activity = Activity(lambda: done["jobs"], lambda: False, clock=lambda: clock["now"])
    seen: list[tuple[float, bool]] = []

    def reclaim() -> None:
        seen.append((clock["now"], activity()))

    keeping = Housekeeping(
        lambda: None, reclaim, lambda: None, None, 1.0, DamageLog(), Outage("redis://x"), idle=activity
    )
    keeping.start(0.0)
    while clock["now"] < 60:
        if clock["now"] < 30:
            done["jobs"] = int(clock["now"] / 0.8)
        keeping.tick(clock["now"], stopping=False)
        clock["now"] += 0.25
    busy = [idle for at, idle in seen if at < 30]
    assert len(busy) >= 30 / RECLAIM_EVERY - 1 and not any(busy), seen
    later = [at for at, idle in seen if at >= 30 + IDLE_AFTER + RECLAIM_EVERY]
    assert all(idle for at, idle in seen if at >= 30 + IDLE_AFTER + RECLAIM_EVERY), seen
    assert len(later) <= (60 - 30 - IDLE_AFTER) / IDLE_RECLAIM_EVERY + 1, later
