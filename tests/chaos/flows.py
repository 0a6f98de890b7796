"""The workflows the chaos test sends through the same faults as its jobs.

A workflow is planned as stages run one after another, each one step or a
group of steps side by side: chains of 3, groups of 10 with a follow-up (a
chord), chains with a group inside, and a few with a step that always
raises (``wf_doom``, max_attempts=1) and an ``on_failure``. Steps are
numbered as taskforge numbers them (depth first: stage by stage, members in
order), so a step's job id ``<workflow>.<index>`` maps back to its plan.
Every step adds numbers, so the workflow's result checks that each step ran
on the right input, once it counted.

Shared by the producer (what to send) and the checks (what to expect).
"""

from __future__ import annotations

import random
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from taskforge import BrokerUnavailable, TaskForge, chain, group
from taskforge.workflows.canvas import Chain, Signature

from .jobs import APP_MODULE, PATIENT

GIVE_UP_AFTER = 120.0  # one workflow that cannot be sent for this long fails the test
SHAPES = {"chain": 0.45, "chord": 0.25, "chain_group": 0.30}
DOOMED_SHAPES = ("doomed_chain", "doomed_chord")
MAX_ATTEMPTS = {"wf_add": PATIENT, "wf_flaky": PATIENT, "wf_sum": PATIENT, "wf_doom": 1, "wf_alert": PATIENT}


@dataclass(frozen=True)
class StepPlan:
    task: str  # chaosapp's name: wf_add, wf_flaky, wf_sum, wf_doom
    args: tuple[Any, ...]  # its own arguments, after the input it receives
    queue: str = "default"

    @property
    def designed_runs(self) -> int:
        return designed_runs(self.task, self.args)


def designed_runs(task: str, args: tuple[Any, ...]) -> int:
    """How many runs a step needs when nothing goes wrong (its own args: what the record's spec keeps)."""
    return int(args[-1]) + 1 if task == "wf_flaky" else 1


@dataclass
class FlowPlan:
    """One logical workflow; a failed ``delay()`` is retried as a new workflow."""

    index: int
    shape: str
    stages: list[list[StepPlan]]
    on_failure: str | None = None  # the wf_alert tag of a doomed workflow
    attempts: int = 0  # delay() calls made
    workflow_id: str | None = None  # set once a delay() call returned

    @property
    def steps(self) -> list[StepPlan]:
        """In taskforge's step order; the on_failure step, when there is one, comes after them."""
        return [step for stage in self.stages for step in stage]

    @property
    def doomed(self) -> int | None:
        """The index of the step made to die, or None."""
        return next((i for i, s in enumerate(self.steps) if s.task == "wf_doom"), None)

    @property
    def final(self) -> str:
        return "succeeded" if self.doomed is None else "dead"

    def later(self, index: int) -> list[int]:
        """The steps of the stages after step ``index``'s: a doomed workflow must never run them."""
        end = 0
        for stage in self.stages:
            end += len(stage)
            if index < end:
                return list(range(end, len(self.steps)))
        return []

    def expected(self) -> Any:
        """The result a succeeded workflow must have: computed here as the tasks compute it."""
        value: Any = None
        for stage in self.stages:
            outs = [compute(step, value) for step in stage]
            value = outs[0] if len(stage) == 1 else outs
        return value

    def canvas(self, app: TaskForge) -> Chain:
        items: list[Any] = []
        for stage in self.stages:
            sigs = [signature(app, step) for step in stage]
            items.append(sigs[0] if len(sigs) == 1 else group(*sigs))
        alert = app.task_for(f"{APP_MODULE}.wf_alert").with_options(max_attempts=PATIENT, max_worker_losses=PATIENT)
        return chain(*items, on_failure=alert.si(self.on_failure) if self.on_failure else None)


def compute(step: StepPlan, given: Any) -> Any:
    args = step.args if given is None else (given, *step.args)
    if step.task in ("wf_add", "wf_flaky"):
        return args[0] + args[1]
    if step.task == "wf_sum":
        return sum(args[0]) + args[1]
    raise AssertionError(f"{step.task} never succeeds")


def signature(app: TaskForge, step: StepPlan) -> Signature[Any]:
    task = app.task_for(f"{APP_MODULE}.{step.task}").with_options(
        queue=step.queue, max_attempts=MAX_ATTEMPTS[step.task], max_worker_losses=PATIENT
    )
    return task.s(*step.args)


def plan_flows(rng: random.Random, n: int) -> list[FlowPlan]:
    """``n`` workflows, about one in twenty doomed (at least two: one chain, one chord)."""
    doomed = set(rng.sample(range(n), min(n, max(2, n // 20))))
    flows: list[FlowPlan] = []
    for index in range(n):
        if index in doomed:
            shape = DOOMED_SHAPES[len([f for f in flows if f.on_failure]) % 2]
        else:
            shape = rng.choices(list(SHAPES), list(SHAPES.values()))[0]
        flows.append(FlowPlan(index, shape, STAGES[shape](rng), f"alert-{index}" if index in doomed else None))
    return flows


def _value(rng: random.Random) -> int:
    return rng.randint(1, 1000)


def _link(rng: random.Random) -> StepPlan:
    """A middle chain step: sometimes one that fails and is retried first."""
    if rng.random() < 0.2:
        return StepPlan("wf_flaky", (_value(rng), rng.choice((1, 2))))
    return StepPlan("wf_add", (_value(rng),))


def _chain(rng: random.Random) -> list[list[StepPlan]]:
    return [[StepPlan("wf_add", (_value(rng), _value(rng)))], [_link(rng)], [StepPlan("wf_add", (_value(rng),))]]


def _chord(rng: random.Random) -> list[list[StepPlan]]:
    members = [StepPlan("wf_add", (_value(rng), _value(rng))) for _ in range(10)]
    return [members, [StepPlan("wf_sum", (_value(rng),), queue="bulk")]]


def _chain_group(rng: random.Random) -> list[list[StepPlan]]:
    size = rng.randint(3, 5)
    members = [StepPlan("wf_add", (_value(rng),), queue=rng.choice(("default", "bulk"))) for _ in range(size)]
    return [[StepPlan("wf_add", (_value(rng), _value(rng)))], members, [StepPlan("wf_sum", (_value(rng),))]]


def _doomed_chain(rng: random.Random) -> list[list[StepPlan]]:
    return [[StepPlan("wf_add", (_value(rng), _value(rng)))], [StepPlan("wf_doom", ())], [_link(rng)]]


def _doomed_chord(rng: random.Random) -> list[list[StepPlan]]:
    members = [StepPlan("wf_add", (_value(rng), _value(rng))) for _ in range(5)]
    members.insert(rng.randrange(6), StepPlan("wf_doom", (_value(rng),)))
    return [members, [StepPlan("wf_sum", (_value(rng),))]]


STAGES: dict[str, Callable[[random.Random], list[list[StepPlan]]]] = {
    "chain": _chain,
    "chord": _chord,
    "chain_group": _chain_group,
    "doomed_chain": _doomed_chain,
    "doomed_chord": _doomed_chord,
}


class FlowProducer(threading.Thread):
    """Sends the planned workflows while the faults happen, as the job producer sends jobs.

    A ``delay()`` that raises ``BrokerUnavailable`` is retried as a new
    workflow; the one it may have stored anyway (a phantom) must still end.
    """

    def __init__(self, url: str, flows: list[FlowPlan], pace: Callable[[], int], log: Callable[[str], None]) -> None:
        super().__init__(name="chaos-flow-producer", daemon=True)
        self.app = TaskForge("chaos-flow-producer", broker=url)
        self.flows = flows
        self.pace = pace  # how many workflows should have been sent by now
        self.log = log
        self.failed_calls = 0
        self.error: str | None = None
        self.stop = threading.Event()

    def run(self) -> None:
        try:
            i = 0
            while i < len(self.flows) and not self.stop.is_set():
                if i >= self.pace():
                    time.sleep(0.02)
                    continue
                self.send(self.flows[i])
                i += 1
        except BaseException:  # noqa: B036 - reported by the test, never lost in a thread
            self.error = traceback.format_exc()
        finally:
            self.app.broker.client.close()

    def send(self, flow: FlowPlan) -> None:
        deadline = time.monotonic() + GIVE_UP_AFTER
        pause = 0.05
        canvas = flow.canvas(self.app)
        while True:
            flow.attempts += 1
            try:
                flow.workflow_id = canvas.delay().id
                return
            except BrokerUnavailable as exc:
                self.failed_calls += 1
                if time.monotonic() > deadline or self.stop.is_set():
                    raise AssertionError(f"workflow {flow.index} could not be sent for {GIVE_UP_AFTER} s") from exc
                self.log(f"flow producer: delay() of workflow {flow.index} failed ({str(exc)[:80]}...); retrying")
                time.sleep(pause)
                pause = min(pause * 2, 1.0)
