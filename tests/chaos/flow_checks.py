"""The checks of the workflows after the storm: each ended as designed, each step stored once.

Every workflow record in Redis is checked, the acknowledged ones (their
``delay()`` returned) against their plan, the phantoms (stored by a
``delay()`` that raised) only for ending. A step's runs come from the side
Redis, keyed by its job id, with the attempt each run had.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import redis

from taskforge import TaskFailed, TaskForge
from taskforge.broker.keys import WORKFLOW_LAUNCHING, WorkflowKeys, workflow_index
from taskforge.serialization import loads_call
from taskforge.workflows.record import StepField
from taskforge.workflows.spec import StepSpec

from .analysis import PRE, Run, classify, parse_runs, restarts
from .faults import Fault
from .flows import FlowPlan, designed_runs
from .jobs import APP_MODULE

ENDED = {"succeeded", "dead", "cancelled"}
RECORD_MATCH = "taskforge:{wf:*}:record"


@dataclass
class Step:
    """One step of a stored workflow, as its record and the side Redis tell it."""

    job_id: str
    task: str  # without the app's module
    queue: str
    designed: int
    runs: list[Run] = field(default_factory=list)
    record: dict[bytes, bytes] = field(default_factory=dict)

    @property
    def state(self) -> str:
        return (self.record.get(b"state") or b"").decode()

    def ran_ok(self) -> bool:
        return any(r.outcome == "ok" for r in self.runs)

    def describe(self) -> str:
        runs = "; ".join(f"attempt {r.attempt} {r.describe()}" for r in self.runs) or "none"
        return f"step {self.job_id} ({self.task}, {self.state or 'not stored'}): runs: {runs}"


@dataclass
class Flow:
    workflow_id: str
    record: dict[bytes, bytes]
    steps: list[Step]  # its steps in order, then its on_failure step if it has one
    on_failure: int | None
    plan: FlowPlan | None = None  # None: a phantom

    @property
    def state(self) -> str:
        return (self.record.get(b"state") or b"").decode()


@dataclass
class FlowTally:
    sent: int = 0
    ended: dict[str, int] = field(default_factory=dict)
    phantoms: int = 0
    steps: int = 0
    successors: int = 0  # steps that wait for another, and on_failure steps, that had to be stored
    successors_once: int = 0
    explained: int = 0
    unexplained: int = 0
    restarts_explained: int = 0
    restarts_unexplained: int = 0
    lost: int = 0
    stale: list[str] = field(default_factory=list)  # index entries the records contradict
    waited: int = 0  # step reports a worker could not deliver at once (the workers' logs say)
    repaired: int = 0  # reports and launches the reconciler finished


def step_key(queue: str, job_id: str) -> str:
    return f"taskforge:{{{queue}}}:job:{job_id}"


def unfinished_flows(client: redis.Redis, flows: list[FlowPlan], queues: set[str]) -> int:
    """Workflows still running (acknowledged, or phantoms listed running), launches unconfirmed, reports
    undelivered: the drain waits for all of them."""
    ids = {f.workflow_id for f in flows if f.workflow_id}
    ids.update(w.decode() for w in client.zrange(workflow_index("running"), 0, -1))
    pipe = client.pipeline(transaction=False)
    for workflow in sorted(ids):
        pipe.hget(WorkflowKeys(workflow).record, "state")
    pipe.zcard(WORKFLOW_LAUNCHING)
    for queue in sorted(queues):
        pipe.hlen(f"taskforge:{{{queue}}}:outbox")
    replies = pipe.execute()
    running = sum(1 for state in replies[: len(ids)] if state == b"running")
    return running + sum(replies[len(ids) :])


def read_flows(client: redis.Redis, side: redis.Redis, prefix: str, flows: list[FlowPlan]) -> list[Flow]:
    """Every workflow record in Redis, with its steps' records and runs."""
    keys = sorted(k.decode() for k in client.scan_iter(match=RECORD_MATCH, count=1000))
    pipe = client.pipeline(transaction=False)
    for key in keys:
        pipe.hgetall(key)
    by_id = {f.workflow_id: f for f in flows if f.workflow_id}
    found = []
    for key, record in zip(keys, pipe.execute(), strict=True):
        workflow = key[len("taskforge:{wf:") : -len("}:record")]
        found.append(flow_of(workflow, record, by_id.get(workflow)))
    steps = [s for flow in found for s in flow.steps]
    pipe = client.pipeline(transaction=False)
    for step in steps:
        pipe.hgetall(step_key(step.queue, step.job_id))
    records = pipe.execute()
    pipe = side.pipeline(transaction=False)
    for step in steps:
        pipe.lrange(f"{prefix}step:{step.job_id}", 0, -1)
        pipe.lrange(f"{prefix}stepends:{step.job_id}", 0, -1)
    raw = pipe.execute()
    for i, (step, record) in enumerate(zip(steps, records, strict=True)):
        step.record = record
        step.runs = parse_runs(step.job_id, raw[2 * i], raw[2 * i + 1])
    return found


def flow_of(workflow: str, record: dict[bytes, bytes], plan: FlowPlan | None) -> Flow:
    count = int(record.get(b"steps") or 0)
    on_failure = int(record[b"on_failure"]) if b"on_failure" in record else None
    steps = []
    for index in [*range(count), *([on_failure] if on_failure is not None else [])]:
        spec = StepSpec.decode(record[StepField.SPEC.key(index)])
        args, _ = loads_call(spec.call)
        task = spec.task.removeprefix(f"{APP_MODULE}.")
        steps.append(Step(f"{workflow}.{index}", task, spec.queue, designed_runs(task, tuple(args))))
    return Flow(workflow, record, steps, on_failure, plan)


def stale_entries(client: redis.Redis, flows: list[Flow]) -> list[str]:
    """The index of workflows against their records: an ended workflow listed running, or one with no record."""
    states = {f.workflow_id: f.state for f in flows}
    stale = []
    for raw in client.zrange(workflow_index("running"), 0, -1):
        workflow = raw.decode()
        state = states.get(workflow)
        if state != "running":
            stale.append(f"workflow {workflow} listed running, its record {'says ' + state if state else 'missing'}")
    return stale


def check_flows(
    flows: list[Flow],
    faults: list[Fault],
    lane_crashes: list[Run],
    crashes: list[tuple[int, float]],
    result_of: Callable[[str], Any],
    problem: Callable[[str], None],
    details: list[str],
    reasons: Counter[str],
) -> FlowTally:
    tally = FlowTally()
    for flow in flows:
        tally.steps += len(flow.steps)
        if flow.plan is None:
            tally.phantoms += 1
        else:
            tally.sent += 1
            tally.ended[flow.state] = tally.ended.get(flow.state, 0) + 1
        check_ending(flow, result_of, problem, tally)
        check_steps(flow, faults, lane_crashes, crashes, problem, details, tally, reasons)
    return tally


def check_ending(flow: Flow, result_of: Callable[[str], Any], problem: Callable[[str], None], tally: FlowTally) -> None:
    """Ended, settled, as designed, with the right result; a dead one ran its on_failure and nothing after."""
    name = f"workflow {flow.workflow_id}" + (f" (#{flow.plan.index} {flow.plan.shape})" if flow.plan else " (phantom)")
    steps = "\n    " + "\n    ".join(s.describe() for s in flow.steps)
    if flow.state not in ENDED:
        tally.lost += 1
        problem(f"LOST: {name} is still {flow.state!r}: it hangs{steps}")
        return
    if flow.record.get(b"settled") != b"1":
        problem(f"{name} ended {flow.state} but was never settled{steps}")
    plan = flow.plan
    if plan is None:
        return
    if flow.state != plan.final:
        problem(f"{name} ended {flow.state}, designed to end {plan.final}: {flow.record.get(b'error')!r}{steps}")
        if flow.state != "succeeded":
            tally.lost += 1
        return
    if flow.state == "succeeded":
        missing = [s.job_id for s in flow.steps[: len(plan.steps)] if not s.ran_ok() or s.state != "succeeded"]
        got = result_of(flow.workflow_id)
        if missing or got != plan.expected():
            tally.lost += 1
            problem(
                f"LOST: {name} succeeded with result {got!r}, expected {plan.expected()!r}; "
                f"steps that never ran to success: {missing}{steps}"
            )
    elif flow.state == "dead":
        check_dead(name, flow, plan, result_of, problem, steps)


def check_dead(
    name: str, flow: Flow, plan: FlowPlan, result_of: Callable[[str], Any], problem: Callable[[str], None], steps: str
) -> None:
    doomed = plan.doomed
    assert doomed is not None
    failed = flow.record.get(b"failed_step", b"").decode()
    if failed != str(doomed):
        problem(f"{name} died at step {failed!r}, not at its wf_doom step {doomed}{steps}")
    raised = result_of(flow.workflow_id)
    if not (isinstance(raised, TaskFailed) and raised.task == f"{APP_MODULE}.wf_doom"):
        problem(f"{name}: result() gave {raised!r}, not TaskFailed naming wf_doom{steps}")
    if flow.on_failure is None:
        problem(f"{name}: its record has no on_failure step{steps}")
    elif not flow.steps[-1].ran_ok():
        problem(f"LOST: {name} died but its on_failure never ran{steps}")
    ran = [flow.steps[i].job_id for i in plan.later(doomed) if flow.steps[i].runs]
    if ran:
        problem(f"{name}: steps after the dead one ran: {ran}{steps}")


def stored(flow: Flow) -> list[Step]:
    """The steps that had to be stored: all of a succeeded workflow's; of a dead one's, those up to
    the dead step's stage and its on_failure. Of one that went wrong otherwise (reported already),
    only those that were."""
    if flow.state == "succeeded":
        return flow.steps
    plan = flow.plan
    if plan is not None and plan.doomed is not None and flow.state == plan.final:
        later = set(plan.later(plan.doomed))
        return [s for i, s in enumerate(flow.steps) if i not in later]
    return [s for s in flow.steps if s.record]


def check_steps(
    flow: Flow,
    faults: list[Fault],
    lane_crashes: list[Run],
    crashes: list[tuple[int, float]],
    problem: Callable[[str], None],
    details: list[str],
    tally: FlowTally,
    reasons: Counter[str],
) -> None:
    """Every step stored once (no second attempt 1, no record newer than a run) and run as often as explained."""
    roots = {s.job_id for i, s in enumerate(flow.steps) if is_root(flow, i)}
    must = {s.job_id for s in stored(flow)}
    for step in flow.steps:
        verdict = classify(step.runs, step.designed, faults, crashes, lane_crashes)
        tally.explained += verdict.explained
        tally.unexplained += verdict.unexplained
        again = restarts(step.runs, faults, crashes, lane_crashes)
        tally.restarts_explained += again.again - again.unexplained
        tally.restarts_unexplained += again.unexplained
        created = int(step.record.get(b"created_at") or 0) / 1000
        first = min((r.start for r in step.runs), default=None)
        renewed = bool(created and first is not None and created > first + PRE)
        line = step.describe()
        if verdict.extra:
            reasons.update(reason.split()[0] for _, reason in verdict.reasons[: verdict.extra])
            details.append(
                f"{line}\n    {verdict.extra} extra, {verdict.unexplained} unexplained; disrupted: "
                + ("; ".join(f"{r.pid}@{r.start:.3f} by {why}" for r, why in verdict.reasons) or "none")
            )
        if verdict.unexplained:
            problem(f"UNEXPLAINED DUPLICATE: {line}")
        if again.unexplained or renewed:
            why = f"attempt 1 ran {again.again + 1} times" if again.unexplained else f"its record is from {created:.3f}"
            problem(f"ENQUEUED TWICE: {line}: {why}")
        if step.job_id in roots or step.job_id not in must:
            continue
        tally.successors += 1
        if not step.record:
            tally.lost += 1
            problem(f"LOST: {line}: never stored, though its workflow ended {flow.state}")
        elif not (again.unexplained or renewed):
            tally.successors_once += 1


def is_root(flow: Flow, index: int) -> bool:
    """A step sent by delay() itself (the first stage), not by a predecessor's report."""
    if flow.plan is not None:
        return index < len(flow.plan.stages[0])
    return f"after:{index}".encode() not in flow.record and index != flow.on_failure


def workflow_results(url: str) -> tuple[Callable[[str], Any], Callable[[], None]]:
    """``result()`` through the public handle: the value, or the TaskFailed it raised; and a closer."""
    app = TaskForge("chaos-checks", broker=url)

    def result_of(workflow: str) -> Any:
        try:
            return app.workflow(workflow).result(timeout=5)
        except TaskFailed as exc:
            return exc

    return result_of, app.broker.client.close
