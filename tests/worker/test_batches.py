"""The worker's batches (docs/worker-model.md, "Process model"), checked with real processes.

A lane claims several jobs in one call and records their successes with its
next claim. What must hold at every ``--prefetch``: each job of a batch is
leased from the claim, and one never started is not charged an attempt when
its child dies; a job of a higher priority starts before any job of the
lane's next claim; a run's outcome is recorded soon after it ends, not when
the batch ends; fencing and timeouts apply to each job as to a lone job.
"""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from taskforge import JobState, TaskForge
from taskforge.cli import main

from .conftest import final, wait_for

pytestmark = [pytest.mark.redis, pytest.mark.slow]


def claim_token(producer: TaskForge, handle) -> str | None:
    """The token of the claim whose report recorded the job: jobs of one batch share it."""
    [token] = producer.broker.claims.job_fields("default", handle.id, ["outcome_token"])
    return token


def test_one_claim_runs_several_jobs_and_records_each_success_while_a_later_one_runs(
    start_worker, producer, side
) -> None:
    first = producer.send("userapp.queued", "first")
    slow = producer.send("userapp.queued", "slow", 3.0)
    last = producer.send("userapp.queued", "last")
    start_worker("-c", "1", "--prefetch", "4")
    wait_for(lambda: b"slow" in side.lrange("side:order", 0, -1), 20, "the slow job to start")
    # Recorded while the slow job of its batch still runs, not when the batch ends.
    wait_for(lambda: first.status() is JobState.SUCCEEDED, 1.5, "the first job's success to be recorded")
    assert slow.status() is JobState.RUNNING and b"slow" not in side.lrange("side:ended", 0, -1)
    assert [final(h) for h in (first, slow, last)] == [JobState.SUCCEEDED] * 3
    assert side.lrange("side:order", 0, -1) == [b"first", b"slow", b"last"]
    assert len({claim_token(producer, h) for h in (first, slow, last)}) == 1  # claimed together
    assert [h.info().attempts for h in (first, slow, last)] == [1, 1, 1]


# Where the job in question stands in its batch: first, its start said by message; later, by the board.
PLACES = pytest.mark.parametrize("before", [0, 2], ids=["first of its batch", "third of its batch"])


@PLACES
def test_a_child_that_dies_gives_back_the_jobs_of_its_batch_it_never_started(
    start_worker, producer, side, before: int
) -> None:
    done = [producer.send("userapp.queued", f"d{n}") for n in range(before)]
    crash = producer.send("userapp.crash_once", "c")  # exits its child on its first run
    rest = [producer.send("userapp.queued", f"r{n}") for n in range(3)]
    worker = start_worker("-c", "1", "--prefetch", "8")
    assert [final(h) for h in (*done, crash, *rest)] == [JobState.SUCCEEDED] * (before + 4)
    # The run that killed its child counts, as a loss (not an attempt): the supervisor knew it ran.
    assert (crash.info().attempts, crash.info().losses) == (1, 1)
    assert [(h.info().attempts, h.info().losses) for h in rest] == [(1, 0)] * 3  # never started: not charged
    ran = side.lrange("side:order", 0, -1)
    assert [ran.count(name) for name in (b"r0", b"r1", b"r2")] == [1, 1, 1]
    # Run before the crash, their successes recorded, or lost with the child and run again at once:
    # not after their lease (60 s), and each run counted (a run lost with the child as a loss).
    for handle in done:
        runs = ran.count(f"d{done.index(handle)}".encode())
        assert (handle.info().attempts, handle.info().losses) == (1, runs - 1) and runs in (1, 2)
    assert "went back to its queue unrun" in worker.output()


@PLACES
def test_a_timeout_kills_one_job_of_a_batch_and_the_others_run_uncharged(
    start_worker, producer, side, before: int
) -> None:
    done = [producer.send("userapp.queued", f"d{n}") for n in range(before)]
    slow = producer.send("userapp.too_slow", "t")  # timeout=1, max_attempts=2
    other = producer.send("userapp.queued", "other")
    start_worker("-c", "1", "--prefetch", "8")
    assert final(slow) is JobState.DEAD
    assert "timeout of 1 s" in slow.info().error
    assert final(other) is JobState.SUCCEEDED
    assert [h.info().attempts for h in (*done, other)] == [1] * (before + 1)
    assert side.lrange("side:order", 0, -1)[-1:] == [b"other"]


def test_a_higher_priority_job_starts_before_the_lanes_next_claim(start_worker, producer, side) -> None:
    low = [producer.send("userapp.queued", f"low{n}", 0.2) for n in range(12)]
    start_worker("-c", "1", "--prefetch", "4")
    wait_for(lambda: side.llen("side:order") >= 2, 20, "two low jobs to start")
    started_before = side.llen("side:order")
    urgent = producer.task_for("userapp.queued").with_options(priority="high").delay("urgent")
    assert final(urgent) is JobState.SUCCEEDED
    order = side.lrange("side:order", 0, -1)
    # At most the rest of the batch in progress (4 jobs) runs before it.
    assert order.index(b"urgent") <= started_before + 3, order
    assert all(final(h) is JobState.SUCCEEDED for h in low)


def test_auto_gives_back_the_rest_of_a_batch_behind_a_run_that_turns_out_long(start_worker, producer, side) -> None:
    # Deep and short: batches grow (runs with no side effect). Auto doubles a lane's batch once
    # its recent runs average under 2.5 ms, the handing on to the supervisor included, which a
    # loaded machine can keep above that for dozens of runs: 300 jobs leave it room to.
    quick = [producer.send("userapp.nothing", n) for n in range(300)]
    # A job that waits for the one after it. Claimed in one batch (most runs), only a give-back lets it
    # end: it goes back to the queue, and the other child runs it.
    pairs = [(producer.send("userapp.waits_for", "gate"), producer.send("userapp.opens", "gate"))]
    start_worker("-c", "2")
    for waiting, opener in pairs:
        assert final(waiting) is JobState.SUCCEEDED, waiting.info().error  # its opener went back, was run
        assert final(opener) is JobState.SUCCEEDED
        assert opener.info().attempts == 1
    assert all(final(h) is JobState.SUCCEEDED for h in quick)
    tokens = {claim_token(producer, h) for h in quick}
    assert len(tokens) < len(quick), "auto never claimed more than one job at a time"


def test_prefetch_one_claims_one_job_at_a_time(start_worker, producer, side) -> None:
    handles = [producer.send("userapp.queued", f"j{n}") for n in range(4)]
    start_worker("-c", "1", "--prefetch", "1")
    assert [final(h) for h in handles] == [JobState.SUCCEEDED] * 4
    assert len({claim_token(producer, h) for h in handles}) == 4


@pytest.mark.parametrize("value", ["0", "257", "many", "-3", "1.5"])
def test_a_prefetch_out_of_range_is_a_usage_error(value: str) -> None:
    result = CliRunner().invoke(main, ["worker", "tests.worker.userapp:app", "--prefetch", value])
    assert result.exit_code == 2
    assert "--prefetch" in result.output and "1 to 256, or auto" in result.output
