"""The chaos test's workflow bookkeeping, on made-up data: fast, no Redis, no processes.

What counts as a step stored twice, a workflow lost or a doomed workflow
gone wrong is pinned here, so the storm test cannot pass by miscounting.
"""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from taskforge import TaskFailed, TaskForge
from taskforge.workflows.plan import make_plan

from .analysis import Run, parse_runs, restarts
from .faults import GRACE, Fault
from .flow_checks import Flow, FlowTally, Step, check_flows, is_root
from .flows import DOOMED_SHAPES, MAX_ATTEMPTS, SHAPES, FlowPlan, StepPlan, plan_flows

SUPERVISOR = 100


def step_runs(job_id: str, *runs: tuple[int, float, float | None, int]) -> list[Run]:
    """Runs of one step by (pid, start, end or None: cut short, attempt); supervisor 100 for all."""
    starts = [f"{pid}:{SUPERVISOR}:{start}:{attempt}".encode() for pid, start, _, attempt in runs]
    ends = [f"{pid}:{end}:ok".encode() for pid, _, end, _ in runs if end is not None]
    return parse_runs(job_id, starts, ends)


def test_a_step_run_carries_its_attempt_and_a_job_run_none() -> None:
    (step,) = parse_runs("w.1", [b"11:100:10.0:3"], [b"11:10.5:ok"])
    assert (step.token, step.attempt, step.end, step.outcome) == ("w.1", 3, 10.5, "ok")
    (job,) = parse_runs(7, [b"11:100:10.0"], [])
    assert job.attempt is None


def test_attempt_one_twice_is_a_second_store_unless_the_first_was_disrupted() -> None:
    twice = step_runs("w.1", (11, 10.0, None, 1), (12, 20.0, 20.1, 1))
    assert (restarts(twice, []).again, restarts(twice, []).unexplained) == (1, 1)
    # SIGTERM at 9.5: the grace ran out at 11.5 with attempt 1 still running; given back unrun.
    term = Fault(1, "worker_term", 9.5, 9.5, target=SUPERVISOR)
    found = restarts(twice, [term])
    assert (found.again, found.unexplained) == (1, 0)
    assert found.reasons[0][1] == "worker_term #1 (past grace)"
    # A run lost with its worker refunds its attempt too (a worker loss): the next claim is attempt 1 again.
    for kind in ("worker_kill", "child_kill", "redis_restart", "redis_pause"):
        other = Fault(2, kind, 10.5, 11.0, target=SUPERVISOR if kind == "worker_kill" else 11)
        assert restarts(twice, [other]).unexplained == 0, kind
    # A kill of another process explains nothing.
    elsewhere = Fault(2, "child_kill", 10.5, 11.0, target=99)
    assert restarts(twice, [elsewhere]).unexplained == 1
    # A SIGTERM whose grace outlasted the run gave nothing back.
    done = step_runs("w.1", (11, 10.0, 10.2, 1), (12, 20.0, 20.1, 1))
    assert restarts(done, [Fault(1, "worker_term", 10.1, 10.1, target=SUPERVISOR)]).unexplained == 1
    # Attempts that go up are one store, however many runs.
    counted = step_runs("w.1", (11, 10.0, None, 1), (12, 20.0, None, 2), (13, 30.0, 30.1, 3))
    assert restarts(counted, []).again == 0
    # One give-back explains one restart, not two.
    thrice = step_runs("w.1", (11, 10.0, None, 1), (12, 20.0, None, 1), (13, 30.0, 30.1, 1))
    assert restarts(thrice, [term]).unexplained == 1
    assert restarts(thrice, [term, Fault(3, "worker_term", 20.0 - GRACE + 0.5, 0, target=SUPERVISOR)]).unexplained == 0


# -- whole workflows ------------------------------------------------------------------


CHAIN = [[StepPlan("wf_add", (1, 2))], [StepPlan("wf_add", (3,))], [StepPlan("wf_add", (4,))]]
DOOMED = [[StepPlan("wf_add", (1, 2))], [StepPlan("wf_doom", ())], [StepPlan("wf_add", (4,))]]


def made_up(stages: list[list[StepPlan]], state: str, runs: dict[int, list[tuple[Any, ...]]], **record: bytes) -> Flow:
    """Workflow "w" of these stages, ended ``state``; each step ran once at attempt 1 unless ``runs`` says."""
    plan = FlowPlan(0, "chain", stages, on_failure="alert-0" if state == "dead" else None, workflow_id="w")
    tasks = [s.task for s in plan.steps] + (["wf_alert"] if plan.on_failure else [])
    steps = []
    for i, task in enumerate(tasks):
        job_id = f"w.{i}"
        ran = runs.get(i, [(10 + i, 10.0 + i, 10.1 + i, 1)])
        created = record.pop(f"created:{i}", str(int((9.0 + i) * 1000)).encode())
        stored = {b"state": b"succeeded", b"created_at": created} if ran else {}
        steps.append(Step(job_id, task, "default", 1, step_runs(job_id, *ran), stored))
    fields = {b"state": state.encode(), b"settled": b"1", b"steps": str(len(plan.steps)).encode()}
    fields.update((name.encode(), value) for name, value in record.items())
    if plan.on_failure:
        fields[b"on_failure"] = str(len(plan.steps)).encode()
    return Flow("w", fields, steps, len(plan.steps) if plan.on_failure else None, plan)


def check(flow: Flow, result: Any = 10, faults: list[Fault] | None = None) -> tuple[FlowTally, list[str]]:
    problems: list[str] = []
    tally = check_flows([flow], faults or [], [], [], lambda _: result, problems.append, [], Counter())
    return tally, problems


def doom_error() -> TaskFailed:
    return TaskFailed("w.1", "dead", "ValueError", None, task="chaosapp.wf_doom")


def test_a_clean_chain_counts_each_successor_stored_once() -> None:
    tally, problems = check(made_up(CHAIN, "succeeded", {}))
    assert problems == []
    assert (tally.sent, tally.ended, tally.successors, tally.successors_once, tally.lost) == (
        1,
        {"succeeded": 1},
        2,
        2,
        0,
    )


def test_a_successor_run_at_attempt_one_twice_is_flagged_as_enqueued_twice() -> None:
    twice = {1: [(11, 11.0, None, 1), (12, 12.0, 12.1, 1)]}
    tally, problems = check(made_up(CHAIN, "succeeded", twice))
    assert any(p.startswith("ENQUEUED TWICE: step w.1") for p in problems)
    assert any(p.startswith("UNEXPLAINED DUPLICATE: step w.1") for p in problems)
    assert (tally.successors, tally.successors_once, tally.restarts_unexplained) == (2, 1, 1)
    # The same runs, with the first one's grace period run out under it: a give-back, not a second store.
    tally, problems = check(made_up(CHAIN, "succeeded", twice), faults=[Fault(1, "worker_term", 10.5, 10.5, 100)])
    assert problems == []
    assert (tally.successors_once, tally.restarts_explained, tally.explained) == (2, 1, 1)


def test_a_step_record_newer_than_its_first_run_was_stored_again() -> None:
    _, problems = check(made_up(CHAIN, "succeeded", {}, **{"created:2": b"13000"}))
    assert [p.split(":")[0] for p in problems] == ["ENQUEUED TWICE"]
    assert "its record is from 13.000" in problems[0]


def test_a_wrong_result_or_a_step_that_never_ran_is_lost() -> None:
    tally, problems = check(made_up(CHAIN, "succeeded", {}), result=11)
    assert tally.lost == 1 and problems[0].startswith("LOST:") and "expected 10" in problems[0]
    tally, problems = check(made_up(CHAIN, "succeeded", {2: []}))
    assert tally.lost == 2  # the workflow (a step never ran) and the step (never stored)
    assert any("never ran to success: ['w.2']" in p for p in problems)


def test_a_workflow_still_running_or_never_settled_is_a_problem() -> None:
    tally, problems = check(made_up(CHAIN, "running", {2: []}))
    assert tally.lost == 1 and "hangs" in problems[0]
    _, problems = check(made_up(CHAIN, "succeeded", {}, settled=b""))
    assert problems and "never settled" in problems[0]


def test_a_doomed_workflow_ends_dead_at_its_doomed_step_and_runs_on_failure_only() -> None:
    runs: dict[int, list[tuple[Any, ...]]] = {2: []}
    tally, problems = check(made_up(DOOMED, "dead", runs, failed_step=b"1"), result=doom_error())
    assert problems == []
    assert (tally.ended, tally.successors, tally.successors_once) == ({"dead": 1}, 2, 2)  # w.1 and on_failure w.3
    _, problems = check(made_up(DOOMED, "dead", {}, failed_step=b"1"), result=doom_error())
    assert len(problems) == 1 and "steps after the dead one ran: ['w.2']" in problems[0]
    _, problems = check(made_up(DOOMED, "dead", {2: [], 3: []}, failed_step=b"1"), result=doom_error())
    assert any("its on_failure never ran" in p for p in problems)
    _, problems = check(made_up(DOOMED, "dead", runs, failed_step=b"0"), result=doom_error())
    assert any("died at step '0'" in p for p in problems)
    tally, problems = check(made_up(DOOMED, "succeeded", {}))
    assert "designed to end dead" in problems[0] and tally.lost == 0


def test_roots_are_the_first_stage_or_the_steps_waiting_for_none() -> None:
    flow = made_up(CHAIN, "succeeded", {})
    assert [is_root(flow, i) for i in range(3)] == [True, False, False]
    flow.plan = None
    flow.record[b"after:1"] = b"0"
    flow.record[b"after:2"] = b"1"
    assert [is_root(flow, i) for i in range(3)] == [True, False, False]


# -- the plan --------------------------------------------------------------------------


def test_the_workflow_plan_mixes_every_shape_replays_and_numbers_steps_as_taskforge_does() -> None:
    flows = plan_flows(random.Random("5:workflows"), 200)
    assert {f.shape for f in flows} == {*SHAPES, *DOOMED_SHAPES}
    assert sum(1 for f in flows if f.doomed is not None) == 10
    assert all((f.on_failure is not None) == (f.doomed is not None) for f in flows)
    assert [(f.shape, f.stages) for f in flows] == [
        (f.shape, f.stages) for f in plan_flows(random.Random("5:workflows"), 200)
    ]
    app = TaskForge("plan-check", broker="memory://")
    for flow in flows:
        steps = make_plan(flow.canvas(app)).steps
        assert [(s.signature.task.name, s.signature.task.queue) for s in steps] == [
            (f"chaosapp.{s.task}", s.queue) for s in flow.steps
        ]


def test_expected_results_follow_the_tasks_arithmetic() -> None:
    assert FlowPlan(0, "chain", CHAIN).expected() == 10
    chord = [[StepPlan("wf_add", (1, 2)), StepPlan("wf_add", (3, 4))], [StepPlan("wf_sum", (5,))]]
    assert FlowPlan(0, "chord", chord).expected() == 15
    inner = [
        [StepPlan("wf_add", (1, 2))],
        [StepPlan("wf_add", (1,)), StepPlan("wf_flaky", (2, 1))],
        [StepPlan("wf_sum", (0,))],
    ]
    assert FlowPlan(0, "chain_group", inner).expected() == 3 + 1 + 3 + 2
    assert FlowPlan(0, "doomed_chain", DOOMED).later(1) == [2]
    with pytest.raises(AssertionError):
        FlowPlan(0, "doomed_chain", DOOMED).expected()


def test_the_app_and_the_workflow_expectations_agree() -> None:
    source = Path(__file__).with_name("chaosapp.py").read_text()
    for name, attempts in MAX_ATTEMPTS.items():
        patient = "@app.task(max_attempts=PATIENT, max_worker_losses=PATIENT, backoff=0.1)"
        decorator = "@app.task(max_attempts=1)" if attempts == 1 else patient
        assert f"{decorator}\ndef {name}(" in source, name
