"""Workflows on a Redis Cluster: a chain and a chord whose steps live on three masters, one SIGKILLed mid-run.

Each of the three queues hashes to a slot of a different master, and each
workflow's own keys (``{wf:<id>}``) to some slot of its own, so every report
crosses slots: a script touching two of them would fail with CROSSSLOT. The
steps record each run in a file (``scaledapp.note_run``), which a failover
cannot roll back, so the tests can count how often every step ran.
"""

from __future__ import annotations

import shutil
import signal
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from redis.crc import key_slot

from taskforge import TaskForge, WorkflowHandle, chain, group, status
from taskforge.broker.keys import QueueKeys, WorkflowKeys
from taskforge.workflows import launch
from tests.worker.conftest import Worker, stop_workers

from .servers import Cluster, client, wait_until

pytestmark = [pytest.mark.redis, pytest.mark.slow]

HERE = Path(__file__).parent
PAUSE = 1.0  # first steps' run: under the cluster-node-timeout, so they end while the killed master is down


def owner(cluster: Cluster) -> Callable[[str], int]:
    """key -> port of the master serving its slot, from one read of the slot map."""
    ranges = [(start, end, int(master[1])) for start, end, master, *_ in client(cluster.masters()[0]).cluster("slots")]

    def master_of(key: str) -> int:
        slot = key_slot(key.encode())
        return next(port for start, end, port in ranges if start <= slot <= end)

    return master_of


def one_queue_per_master(cluster: Cluster) -> list[str]:
    """Three queue names whose keys (tag ``{<name>}``) live on three different masters."""
    master_of = owner(cluster)
    chosen: dict[int, str] = {}
    for i in range(1000):
        chosen.setdefault(master_of(QueueKeys(f"flow{i}").pending), f"flow{i}")
        if len(chosen) == 3:
            return [chosen[port] for port in sorted(chosen)]
    raise AssertionError(f"no queue name maps to each of the masters {cluster.masters()}")


def workflow_ids_on(cluster: Cluster, masters: list[int]) -> Iterator[uuid.UUID]:
    """Random ids whose workflow keys land on ``masters[0]``, then ``masters[1]``...: where a test wants them."""
    master_of = owner(cluster)
    for master in masters:
        while master_of(WorkflowKeys((candidate := uuid.uuid4()).hex).record) != master:
            pass
        yield candidate


@dataclass
class Flows:
    cluster: Cluster
    app: TaskForge
    queues: list[str]  # queues[i] lives on masters[i]
    trail: Any
    gather: Any
    runs_file: Path
    worker: Worker

    def on(self, task: Any, index: int) -> Any:
        return task.with_options(queue=self.queues[index])

    def launch(self, pause: float = 0.0) -> tuple[WorkflowHandle[Any], WorkflowHandle[Any]]:
        """A chain over the three queues, and a chord with a member on each and its follow-up on queues[1]."""
        a, b, c = (self.on(self.trail, i) for i in range(3))
        chained = chain(a.s([], "a", pause), b.s("b"), c.s("c")).delay()
        members = group(a.s([], "x", pause), b.s([], "y", pause), c.s([], "z", pause))
        chord = chain(members, self.on(self.gather, 1).s("end")).delay()
        return chained, chord

    def expected(self) -> tuple[list[str], list[str]]:
        a, b, c = self.queues
        return [f"a@{a}", f"b@{b}", f"c@{c}"], [f"x@{a}", f"y@{b}", f"z@{c}", f"end@{b}"]

    def runs(self) -> Counter[tuple[str, int]]:
        """(job id, attempt) -> how many runs started with it."""
        if not self.runs_file.exists():
            return Counter()
        lines = self.runs_file.read_text().split()
        return Counter(zip(lines[::2], map(int, lines[1::2]), strict=True))


def producer(url: str) -> tuple[TaskForge, Any, Any]:
    """Tasks by the names ``scaledapp`` registers, run only by the worker."""
    app = TaskForge("scaled", broker=url, durability="replicated")

    @app.task(name="scaled.trail", queue="q00", max_attempts=5)
    def trail(path: list[str], label: str, pause: float = 0.0) -> list[str]:
        raise AssertionError("runs in the worker")

    @app.task(name="scaled.gather", queue="q00", max_attempts=5)
    def gather(parts: list[list[str]], label: str) -> list[str]:
        raise AssertionError("runs in the worker")

    return app, trail, gather


@pytest.fixture(scope="module")
def flows(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Flows]:
    """One worker (6 lanes: every first step of both workflows runs at once) on the three queues."""
    home = tmp_path_factory.mktemp("cluster-workflows")
    shutil.copy(HERE / "scaledapp.py", home / "scaledapp.py")
    queues = one_queue_per_master(cluster)
    runs_file = home / "runs"
    with pytest.MonkeyPatch.context() as env:
        env.setenv("SCALED_DURABILITY", "replicated")
        env.setenv("SCALED_RUNS", str(runs_file))
        args = [*(arg for q in queues for arg in ("-q", q)), "-c", "2", "--threads", "3"]
        worker = Worker(home, cluster.url, args, home / "worker.log", "scaledapp:app")
    try:
        app, trail, gather = producer(cluster.url)
        wait_until(lambda: len(status.workers(app)) == 1, 30, "the worker in the registry")
        yield Flows(cluster, app, queues, trail, gather, runs_file, worker)
    finally:
        stop_workers([worker], grace=20)


def step_ids(*workflows: WorkflowHandle[Any]) -> list[str]:
    return [step.id for workflow in workflows for step in workflow.info().steps]


def assert_each_step_ran_first_once(flows: Flows, *workflows: WorkflowHandle[Any]) -> None:
    """Every step started exactly one run as attempt 1: each successor was stored and claimed once."""
    runs = flows.runs()
    ids = step_ids(*workflows)
    firsts = {job: runs[(job, 1)] for job in ids}
    assert firsts == dict.fromkeys(ids, 1), f"runs by (step, attempt): {dict(runs)}"


def assert_outboxes_empty(flows: Flows) -> None:
    """Every report was delivered: none is left for the reconciler."""
    wait_until(
        lambda: not any(flows.app.broker.ledger.outbox(q) for q in flows.queues), 30, "the queues' outboxes to be empty"
    )


def test_the_three_queues_live_on_three_different_masters(flows: Flows) -> None:
    master_of = owner(flows.cluster)
    masters = [master_of(QueueKeys(q).pending) for q in flows.queues]
    assert sorted(set(masters)) == flows.cluster.masters() and len(masters) == 3


def test_a_chain_and_a_chord_over_three_masters_complete(flows: Flows) -> None:
    chained, chord = flows.launch()
    want_chain, want_chord = flows.expected()
    assert chained.result(timeout=60) == want_chain
    assert chord.result(timeout=60) == want_chord
    ids = {chained.id, chord.id}
    runs = {run: n for run, n in flows.runs().items() if run[0].rpartition(".")[0] in ids}
    assert runs == {(job, 1): 1 for job in step_ids(chained, chord)}, "one run of each step, none retried"
    assert_outboxes_empty(flows)


def test_both_complete_through_a_killed_master(flows: Flows, monkeypatch: pytest.MonkeyPatch) -> None:
    """SIGKILL the master of queues[1] while every first step runs; its replica takes over.

    On that master: the chain's own keys (its first step's report must wait
    out the failover, or be delivered again by the reconciler), the chain's
    second step (sent to it), the chord member that is running there, and
    the chord's follow-up. The chord's keys are on another master, so its
    reports go on meanwhile. ``launch`` draws workflow ids from ``uuid``;
    here it draws ids chosen to land on those masters.
    """
    cluster = flows.cluster
    wait_until(cluster.healthy, 30, "the cluster to be whole")
    masters = [owner(cluster)(QueueKeys(q).pending) for q in flows.queues]
    victim = masters[1]
    monkeypatch.setattr(launch, "uuid", SimpleNamespace(uuid4=workflow_ids_on(cluster, [victim, masters[2]]).__next__))
    chained, chord = flows.launch(pause=PAUSE)
    first_steps = [f"{chained.id}.0", *(f"{chord.id}.{i}" for i in range(3))]
    wait_until(lambda: all(flows.runs()[(job, 1)] for job in first_steps), 30, "every first step to start")

    cluster.kill(victim)
    wait_until(
        lambda: victim not in cluster.masters() and len(cluster.masters()) == 3,
        30,
        "a replica to take over the killed master's slots",
    )
    cluster.restart(victim)  # it rejoins as a replica of its replacement
    wait_until(lambda: client(victim).info("replication")["role"] == "slave", 30, "the old master to rejoin")

    want_chain, want_chord = flows.expected()
    assert chained.result(timeout=90) == want_chain, flows.worker.output()[-3000:]
    assert chord.result(timeout=90) == want_chord, flows.worker.output()[-3000:]
    assert_each_step_ran_first_once(flows, chained, chord)
    assert_outboxes_empty(flows)
    assert flows.worker.proc.poll() is None, "the worker kept running through the failover"
    wait_until(cluster.healthy, 30, "the cluster to be whole again")
    left = flows.worker.output().count("left behind")
    print(f"cluster workflows: {left} report(s) delivered by the reconciler after the failover")


def replica_of(master: int) -> int:
    return int(client(master).info("replication")["slave0"]["port"])


def replica_of_offset(master: int) -> int:
    """How much of ``master``'s replication stream its replica has."""
    return int(client(master).info("replication")["slave0"]["offset"])


def poll(predicate: Callable[[], object], timeout: float) -> bool:
    """Like ``wait_until``, but False rather than an error when ``timeout`` passes."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_a_report_its_master_never_replicated_is_delivered_again(flows: Flows, monkeypatch: pytest.MonkeyPatch) -> None:
    """The workflow's master counts step 0, its replica never sees it, then the master dies.

    Redis replicates asynchronously: a master SIGKILLed right after a write
    can take it along. Here the window is held open on purpose: the replica
    is stopped and its link closed before step 0 ends, so its report reaches
    the master only. A report must stay in the outbox until a replica has it
    (as an enqueue or an outcome does under durability="replicated"), or the
    promoted replica never learns that step 0 ended and the chain never does.
    """
    cluster = flows.cluster
    wait_until(cluster.healthy, 30, "the cluster to be whole")
    victim = owner(cluster)(QueueKeys(flows.queues[2]).pending)
    replica = replica_of(victim)
    monkeypatch.setattr(launch, "uuid", SimpleNamespace(uuid4=workflow_ids_on(cluster, [victim]).__next__))
    a, b = flows.on(flows.trail, 0), flows.on(flows.trail, 1)
    # Step 0 runs long enough for the replica to be stopped before it ends: its report
    # must reach the master only (under load, 1 s was sometimes over first).
    chained = chain(a.s([], "a", 3 * PAUSE), b.s("b", PAUSE)).delay()
    record = WorkflowKeys(chained.id).record
    wait_until(lambda: flows.runs()[(f"{chained.id}.0", 1)], 30, "the first step to start")
    written = client(victim).info("replication")["master_repl_offset"]
    wait_until(lambda: replica_of_offset(victim) >= written, 30, "the replica to hold the new workflow")
    cluster.procs[replica].send_signal(signal.SIGSTOP)
    try:
        client(victim).execute_command("CLIENT", "KILL", "TYPE", "replica")
        wait_until(lambda: client(victim).hexists(record, "result:0"), 30, "the master to count step 0")
        # No replica confirms the report, so the worker must keep it in its outbox.
        poll(lambda: not flows.app.broker.ledger.outbox(flows.queues[0]), 5)
        cluster.kill(victim)
    finally:
        cluster.procs[replica].send_signal(signal.SIGCONT)
    wait_until(
        lambda: victim not in cluster.masters() and len(cluster.masters()) == 3,
        30,
        "the cut-off replica to take over the killed master's slots",
    )
    assert not client(replica).hexists(record, "result:0"), "the promoted replica never received the report"
    cluster.restart(victim)
    wait_until(lambda: client(victim).info("replication")["role"] == "slave", 30, "the old master to rejoin")
    a_queue, b_queue, _ = flows.queues
    assert chained.result(timeout=30) == [f"a@{a_queue}", f"b@{b_queue}"]
