"""Issue #5: the delivery promise under a storm of faults.

Real ``taskforge worker`` processes run a mixed workload against a private,
durable redis-server (AOF, fsync always) while a seeded fault driver kills
children, kills and terminates whole workers, restarts Redis and freezes it.
A third of the jobs are ``async def`` tasks (chaosapp's ``aio_*`` twins), run on
the children's event loops beside the sync lanes.
Workflows go through the same storm (flows.py): chains, chords, chains with
a group, and a few made to die. Then every acknowledged job must have
reached its designed final state, its side effect must have happened, every
workflow must have ended as designed with the right result and each of its
successors stored exactly once (flow_checks.py), no finished durable step may
have run again and every stream item must reach its live readers once, in
order (durable_checks.py), no job or step may have run
more often than its design needs unless a fault explains it (see
analysis.py), no claim may be left behind, Redis may hold nothing outside
the documented keyspace, no worker may crash or leave a process behind.

Size and replay, by environment variable::

    CHAOS_SEED=1234         replay a run (the seed is printed at the start)
    CHAOS_JOBS=2000         acknowledged jobs to enqueue
    CHAOS_WORKFLOWS=200     acknowledged workflows to send (about 1,200 steps)
    CHAOS_FAULTS=20         faults of each kind
    CHAOS_LONG_PAUSES=2     Redis pauses longer than the client's socket timeout
    CHAOS_SIDE_REDIS=redis://127.0.0.1:6379/10   where tasks record their runs
    CHAOS_DRAIN_TIMEOUT=180 seconds the workers get to finish once the faults stop
    CHAOS_KEEP=1            keep the artifacts directory (logs, AOF, report) even on success
    CHAOS_WORKER_ARGS="--prefetch 1"   more options for every worker (default: none, batches on auto)
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis

from tests.conftest import skip_or_fail

from .checks import QUEUES, check_all, unfinished_ids, unfinished_jobs
from .durable_checks import StreamReaders
from .faults import FaultDriver, estimated_seconds, plan_faults, worker_args
from .flow_checks import unfinished_flows
from .flows import FlowPlan, FlowProducer, plan_flows
from .jobs import JobPlan, plan_jobs
from .procs import RedisServer, WorkerProcess, wait_for
from .producer import GIVE_UP_AFTER, Producer

JOBS = int(os.environ.get("CHAOS_JOBS", "2000"))
WORKFLOWS = int(os.environ.get("CHAOS_WORKFLOWS", "200"))
FAULTS = int(os.environ.get("CHAOS_FAULTS", "20"))
LONG_PAUSES = int(os.environ.get("CHAOS_LONG_PAUSES", "2"))
SIDE_URL = os.environ.get("CHAOS_SIDE_REDIS", "redis://127.0.0.1:6379/10")
DRAIN_TIMEOUT = float(os.environ.get("CHAOS_DRAIN_TIMEOUT", "180"))
STOP_TIMEOUT = 45.0  # for every worker still running to obey the final SIGTERM (grace: 2 s)

# Every wait below is bounded well inside this; it only guards against a hang in the test itself.
pytestmark = [pytest.mark.redis, pytest.mark.slow, pytest.mark.timeout(900)]


@pytest.fixture
def side() -> Iterator[redis.Redis]:
    """Where tasks record their runs: a Redis the test never disturbs."""
    client = redis.Redis.from_url(SIDE_URL, socket_timeout=10, socket_connect_timeout=2)
    try:
        client.ping()
    except redis.ConnectionError as exc:
        client.close()
        skip_or_fail(f"the chaos test records runs in a Redis at {SIDE_URL}: {exc}")
    if shutil.which("redis-server") is None:
        client.close()
        skip_or_fail("the chaos test needs the redis-server binary for its private, killable Redis")
    yield client
    client.close()


@dataclass
class Artifacts:
    path: Path
    keep: bool = True  # until the checks pass


@pytest.fixture
def artifacts() -> Iterator[Artifacts]:
    """Logs, AOF and report, outside pytest's tmp_path (concurrent runs rotate that away); kept on failure."""
    kept = Artifacts(Path(tempfile.mkdtemp(prefix="taskforge-chaos-")))
    yield kept
    if not kept.keep:
        shutil.rmtree(kept.path, ignore_errors=True)


class Journal:
    """Timestamped lines: the fault log (faults.log in the artifacts directory)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __call__(self, message: str) -> None:
        with self.path.open("a") as f:
            f.write(f"{time.time():.3f} {message}\n")


def test_no_job_lost_or_run_twice_unexplained_under_faults(artifacts: Artifacts, side: redis.Redis, capsys) -> None:
    seed = int(os.environ.get("CHAOS_SEED") or random.SystemRandom().randrange(1, 2**31))
    base = artifacts.path
    with capsys.disabled():
        print(
            f"\nchaos: seed={seed} jobs={JOBS} workflows={WORKFLOWS} faults per kind={FAULTS} "
            f"long pauses={LONG_PAUSES} (replay with CHAOS_SEED={seed}); artifacts in {base}"
        )
    prefix = f"chaos:{seed}:{uuid.uuid4().hex[:8]}:"
    journal = Journal(base / "faults.log")
    appdir = base / "app"
    appdir.mkdir()
    (appdir / "chaosapp.py").write_text(Path(__file__).with_name("chaosapp.py").read_text())
    (base / "redis").mkdir()
    server = RedisServer(base / "redis")
    env = {
        **os.environ,
        "TASKFORGE_BROKER_URL": server.url,
        "CHAOS_SIDE_REDIS": SIDE_URL,
        "CHAOS_PREFIX": prefix,
        "PYTHONUNBUFFERED": "1",
    }
    numbers = iter(range(1, 100_000))

    def new_worker() -> WorkerProcess:
        number = next(numbers)
        return WorkerProcess(number, appdir, env, worker_args(number))

    driver = FaultDriver(server, side, prefix, new_worker, journal)
    producer: Producer | None = None
    flow_producer: FlowProducer | None = None
    started = time.monotonic()
    try:
        server.start()
        journal(f"private redis-server pid {server.pid} at {server.url}, AOF in {server.dir}")
        driver.keep_workers()
        for worker in list(driver.workers):
            wait_for(lambda w=worker: len(w.job_children()) >= 2, 60, f"{worker} to start its children", 0.1)

        planned = plan_faults(random.Random(seed), FAULTS, LONG_PAUSES)
        jobs = plan_jobs(random.Random(f"{seed}:jobs"), JOBS)
        flows = plan_flows(random.Random(f"{seed}:workflows"), WORKFLOWS)
        estimate = estimated_seconds(planned)
        journal(
            f"plan: {len(planned)} faults, about {estimate:.0f} s; {len(jobs)} jobs "
            f"{dict(Counter(j.kind for j in jobs))}, {sum(j.asynchronous for j in jobs)} of them async; "
            f"{len(flows)} workflows {dict(Counter(f.shape for f in flows))}"
        )
        t0 = time.monotonic()

        def pace(total: int) -> int:
            """Spread the enqueues over the first three quarters of the faults."""
            return 1 + int(total * min(1.0, (time.monotonic() - t0) / (0.75 * estimate)))

        producer = Producer(server.url, jobs, lambda: pace(JOBS), journal)
        flow_producer = FlowProducer(server.url, flows, lambda: pace(WORKFLOWS), journal)
        readers = StreamReaders(server.url, jobs, journal)
        producer.start()
        flow_producer.start()
        readers.start()
        driver.run(planned, budget=2 * estimate + 60)
        journal("faults over")
        for thread in (producer, flow_producer):
            thread.join(timeout=GIVE_UP_AFTER + 60)
            assert not thread.is_alive(), f"{thread.name} did not finish"
            assert thread.error is None, f"{thread.name} failed:\n{thread.error}"
        readers.producing.clear()

        drained = drain(server.client, driver, jobs, flows, journal)
        stop_all(driver, journal)
        report = check_all(
            base / "report.txt",
            seed,
            server.client,
            side,
            prefix,
            driver,
            producer,
            jobs,
            FAULTS,
            drained,
            server.url,
            flow_producer,
            readers,
        )
        journal(report.summary)
        journal(report.stats)
        with capsys.disabled():
            print(report.summary)
            print(f"chaos: {report.stats}; {time.monotonic() - started:.0f} s in all")
        assert not report.problems, report.failure_message()
        artifacts.keep = os.environ.get("CHAOS_KEEP", "") == "1"
    finally:
        for sender in (producer, flow_producer):
            if sender is not None:
                sender.stop.set()
                sender.join(timeout=GIVE_UP_AFTER + 5)
        for worker in driver.workers:
            worker.cleanup()
        server.cleanup()
        stale = list(side.scan_iter(match=prefix + "*", count=1000))
        for i in range(0, len(stale), 500):
            side.unlink(*stale[i : i + 500])


def drain(
    client: redis.Redis, driver: FaultDriver, jobs: list[JobPlan], flows: list[FlowPlan], journal: Journal
) -> bool:
    """Let the workers finish everything, phantoms included; bounded: False if time ran out.

    A workflow whose ``delay()`` failed half way waits for the reconciler's
    launch grace (30 s) before its first steps go: that too is waited for.
    """
    deadline = time.monotonic() + DRAIN_TIMEOUT
    next_note = 0.0
    while time.monotonic() < deadline:
        driver.keep_workers()
        try:
            left = (unfinished_jobs(client, jobs), unfinished_ids(client), unfinished_flows(client, flows, QUEUES))
        except redis.RedisError as exc:
            journal(f"drain: cannot read the queue ({exc}); retrying")
            time.sleep(1)
            continue
        if left == (0, 0, 0) or time.monotonic() >= next_note:
            journal(
                f"drain: {left[0]} acknowledged jobs unfinished, {left[1]} ids in pending/scheduled/running, "
                f"{left[2]} workflows running, launching or with reports undelivered"
            )
            next_note = time.monotonic() + 5
        if left == (0, 0, 0):
            return True
        time.sleep(0.5)
    journal(f"drain: gave up after {DRAIN_TIMEOUT} s")
    return False


def stop_all(driver: FaultDriver, journal: Journal) -> None:
    """SIGTERM the workers still running; then every worker must be gone, with its whole group."""
    for worker in driver.workers:
        if worker.alive() and worker.signalled is None:
            worker.send(signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT
    for worker in driver.workers:
        try:
            worker.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            journal(f"{worker} still running {STOP_TIMEOUT} s after SIGTERM")
        worker.alive()
    try:
        wait_for(lambda: not driver.orphans(), 15, "every worker's process group to be empty", 0.1)
    except AssertionError:
        journal(f"orphans: {driver.orphans()}")
