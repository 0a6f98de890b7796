"""The chaos test's own logic, on made-up data: fast, no Redis, no processes.

The storm test is only as honest as its bookkeeping, so the rules that call
a duplicate explained or not, and the parsers feeding them, are pinned here.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from .analysis import ACK_SLACK, Run, classify, disruption, documented_keyspace, keyspace_violation, parse_runs
from .faults import GRACE, KINDS, LONG_PAUSE, Fault, plan_faults
from .jobs import ASYNC_SHARE, PATIENT, plan_jobs
from .jobs import KINDS as JOB_KINDS
from .procs import tracebacks

QUEUES = {"default", "bulk"}


def runs_of(*starts: tuple[int, float, float | None]) -> list:
    """Runs of token 7 by (pid, start, end); supervisor 100 for all."""
    runs = [f"{pid}:100:{start}".encode() for pid, start, _ in starts]
    ends = [f"{pid}:{end}:ok".encode() for pid, _, end in starts if end is not None]
    return parse_runs(7, runs, ends)


def test_parse_runs_pairs_each_start_with_the_next_end_of_the_same_process() -> None:
    runs = parse_runs(7, [b"11:100:10.0", b"12:100:20.0", b"11:100:30.0"], [b"11:31.0:ok", b"11:10.5:raise"])
    assert [(r.pid, r.start, r.end, r.outcome) for r in runs] == [
        (11, 10.0, 10.5, "raise"),
        (12, 20.0, None, None),
        (11, 30.0, 31.0, "ok"),
    ]


def test_child_kill_explains_only_the_run_of_that_child_while_it_ran() -> None:
    (run,) = runs_of((11, 10.0, None))
    assert disruption(run, [Fault(1, "child_kill", 12.0, 12.0, target=11)]) == "child_kill #1"
    assert disruption(run, [Fault(1, "child_kill", 12.0, 12.0, target=99)]) is None
    (done,) = runs_of((11, 10.0, 10.1))
    assert disruption(done, [Fault(1, "child_kill", 10.1 + ACK_SLACK / 2, 0, target=11)]) is not None
    assert disruption(done, [Fault(1, "child_kill", 10.1 + ACK_SLACK + 1, 0, target=11)]) is None


def test_worker_kill_and_term_match_the_supervisor() -> None:
    (run,) = runs_of((11, 10.0, None))
    assert disruption(run, [Fault(1, "worker_kill", 10.5, 10.5, target=100)]) == "worker_kill #1"
    assert disruption(run, [Fault(1, "worker_kill", 10.5, 10.5, target=101)]) is None
    # Seen in CI: the supervisor SIGKILLed at 9.68, its children gone at 10.23 (PDEATHSIG comes with the
    # end of its exit, late on a loaded machine): a lane claimed and started a job at 10.0 meanwhile.
    assert disruption(run, [Fault(1, "worker_kill", 9.68, 10.23, target=100)]) == "worker_kill #1"
    assert disruption(run, [Fault(1, "worker_kill", 9.0, 9.5, target=100)]) is None  # gone before it started
    assert disruption(run, [Fault(2, "worker_term", 10.5, 10.5, target=100)]) == "worker_term #2 (past grace)"
    (quick,) = runs_of((11, 10.0, 10.2))  # finished well within the grace period: no excuse
    assert disruption(quick, [Fault(2, "worker_term", 10.1, 10.1, target=100)]) is None
    (late,) = runs_of((11, 10.0, 10.1 + GRACE - 0.2))  # ended just as the grace ran out
    assert disruption(late, [Fault(2, "worker_term", 10.1, 10.1, target=100)]) is not None


def test_redis_faults_explain_runs_they_overlap() -> None:
    (run,) = runs_of((11, 10.0, 11.0))
    assert disruption(run, [Fault(1, "redis_pause", 10.5, 14.0)]) == "redis_pause #1"
    assert disruption(run, [Fault(1, "redis_restart", 11.5, 12.0)]) == "redis_restart #1"  # its ack in flight
    assert disruption(run, [Fault(1, "redis_pause", 5.0, 9.0)]) is None  # over before it started
    assert disruption(run, [Fault(1, "redis_pause", 11.0 + ACK_SLACK + 0.5, 20.0)]) is None


def test_each_disrupted_run_explains_one_extra_run() -> None:
    faults = [Fault(1, "child_kill", 10.5, 10.5, target=11)]
    two = runs_of((11, 10.0, None), (12, 13.0, 13.1))
    assert (classify(two, 1, faults).explained, classify(two, 1, faults).unexplained) == (1, 0)
    three = runs_of((11, 10.0, None), (12, 13.0, 13.1), (12, 20.0, 20.1))
    verdict = classify(three, 1, faults)
    assert (verdict.extra, verdict.explained, verdict.unexplained) == (2, 1, 1)
    assert classify(runs_of((11, 1.0, 1.1), (12, 2.0, 2.1)), 2, []).extra == 0  # flaky: two runs by design


def test_a_crash_in_another_lane_explains_only_runs_it_overlapped_in_its_own_process() -> None:
    crash = Run(token=3, pid=11, ppid=100, start=10.0, end=10.01, outcome="crash")
    assert disruption(Run(7, 11, 100, 9.0), [], lane_crashes=[crash]) == "lane_crash of token 3 in child 11"
    assert disruption(Run(7, 12, 100, 9.0), [], lane_crashes=[crash]) is None  # another process
    # Ended before the crash run started: recorded already (one lane runs one job at a time).
    assert disruption(Run(7, 11, 100, 8.0, 9.5, "ok"), [], lane_crashes=[crash]) is None
    assert disruption(Run(7, 11, 100, 10.02), [], lane_crashes=[crash]) is not None  # between record and exit
    # Ended a moment before the crash run started, its outcome not yet written when the process died.
    assert disruption(Run(7, 11, 100, 9.9, 9.95, "ok"), [], lane_crashes=[crash]) is not None
    assert disruption(Run(7, 11, 100, 11.0), [], lane_crashes=[crash]) is None  # started after it
    assert disruption(crash, [], lane_crashes=[crash]) is None  # the crash run itself is designed


TABLE = """
    taskforge:{q}:job:<id>     hash    one job
    taskforge:{q}:pending      zset    ready jobs
    taskforge:{q}:seq          string  enqueue counter
    taskforge:{q}:done:<id>    list    exists once a job is finished
    taskforge:queues           set     every queue name
    taskforge:worker:<id>      hash    one live worker
"""


def test_keyspace_is_read_from_the_table() -> None:
    table = documented_keyspace(TABLE)
    documented = [
        ("taskforge:{default}:job:0af3", "hash"),
        ("taskforge:{bulk}:pending", "zset"),
        ("taskforge:{default}:seq", "string"),
        ("taskforge:{default}:done:0af3", "list"),
        ("taskforge:queues", "set"),
        ("taskforge:worker:host:12:ab", "hash"),
    ]
    assert [keyspace_violation(k, t, QUEUES, table) for k, t in documented] == [None] * len(documented)
    assert keyspace_violation("taskforge:{default}:job:0af3", "string", QUEUES, table)  # wrong type
    assert keyspace_violation("taskforge:{other}:pending", "zset", QUEUES, table)  # not a queue of the app
    assert keyspace_violation("taskforge:{default}:running", "zset", QUEUES, table)  # not in this table
    assert keyspace_violation("taskforge:{default}:pending:x", "zset", QUEUES, table)
    assert keyspace_violation("side:runs:1", "list", QUEUES, table)


def test_the_real_keys_py_documents_the_core_keys() -> None:
    for key, kind in [
        ("taskforge:{default}:job:0af3", "hash"),
        ("taskforge:{default}:running", "zset"),
        ("taskforge:{default}:dead", "zset"),
        ("taskforge:{default}:wake", "list"),
        ("taskforge:workers", "zset"),
        ("taskforge:queues", "set"),
    ]:
        assert keyspace_violation(key, kind, QUEUES) is None, key


def test_the_index_of_workflows_is_no_queue_and_a_workflows_keys_are_documented() -> None:
    for key, kind in [
        ("taskforge:{workflows}:running", "zset"),  # also fits the row of a queue's running set
        ("taskforge:{workflows}:dead", "zset"),
        ("taskforge:{workflows}:launching", "zset"),
        ("taskforge:{wf:0af3}:record", "hash"),
        ("taskforge:{wf:0af3}:wait:2", "set"),
        ("taskforge:{default}:outbox", "hash"),
    ]:
        assert keyspace_violation(key, kind, QUEUES) is None, key
    assert keyspace_violation("taskforge:{other}:running", "zset", QUEUES)  # still no queue of the app
    assert keyspace_violation("taskforge:{workflows}:running", "hash", QUEUES)  # the wrong type for every row


SUPERVISOR_CRASH = """\
2026-12-02 15:52:45,858 INFO [supervisor pid 1] worker h:1:b9: 2 children on queues default (pid 1)
Traceback (most recent call last):
  File "/venv/redis/connection.py", line 3280, in get_connection
    connection.can_read()
redis.exceptions.ConnectionError: Connection closed by server.

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "/srv/app/taskforge/worker/supervisor.py", line 282, in run
    self.duty(self.renew_leases)
  File "/srv/app/taskforge/worker/registry.py", line 45, in beat
    pipe.execute()
redis.exceptions.ConnectionError: Error 111 connecting to 127.0.0.1:1. Connection refused.
2026-12-02 15:52:47,506 WARNING [child 1 pid 2] child 1: cannot reach the broker
Process taskforge-child-0:
Traceback (most recent call last):
  File "/py/multiprocessing/process.py", line 314, in _bootstrap
    self.run()
  File "/srv/app/taskforge/worker/child.py", line 141, in run
    self.pipe.send(("start", claim.id))
BrokenPipeError: [Errno 32] Broken pipe
Traceback (most recent call last):
  File "<string>", line 1, in <module>
  File "/py/multiprocessing/spawn.py", line 130, in _main
    preparation_data = reduction.pickle.load(from_parent)
EOFError: Ran out of input
Process taskforge-child-1:
Traceback (most recent call last):
"""


def test_tracebacks_are_told_apart_by_owner() -> None:
    assert tracebacks(SUPERVISOR_CRASH) == [
        (
            "supervisor",
            "taskforge/worker/registry.py:45 in beat",
            "redis.exceptions.ConnectionError: Error 111 connecting to 127.0.0.1:1. Connection refused.",
        ),
        ("child", "taskforge/worker/child.py:141 in run", "BrokenPipeError: [Errno 32] Broken pipe"),
        ("spawn", "?", "EOFError: Ran out of input"),
        ("child", "?", ""),  # SIGKILLed while printing it
    ]
    assert tracebacks("2026 INFO all good\n") == []


def test_fault_plan_has_every_kind_the_same_number_of_times_and_replays() -> None:
    plan = plan_faults(random.Random(5), 20, 2)
    assert {k: sum(p.kind == k for p in plan) for k in KINDS} == dict.fromkeys(KINDS, 20)
    assert sum(p.duration == LONG_PAUSE for p in plan) == 2
    assert plan == plan_faults(random.Random(5), 20, 2)
    assert plan != plan_faults(random.Random(6), 20, 2)


def test_job_plan_mixes_every_kind_and_replays() -> None:
    jobs = plan_jobs(random.Random("5:jobs"), 2000)
    assert len(jobs) == 2000 and [j.index for j in jobs] == list(range(2000))
    assert {j.kind for j in jobs} == set(JOB_KINDS)
    assert any(j.delay for j in jobs) and any(j.batch for j in jobs) and any(j.by_name for j in jobs)
    assert any(j.priority for j in jobs)
    assert [(j.kind, j.extra, j.delay, j.asynchronous) for j in jobs] == [
        (j.kind, j.extra, j.delay, j.asynchronous) for j in plan_jobs(random.Random("5:jobs"), 2000)
    ]


@pytest.mark.parametrize("n", [1, 7, 60, 300, 2000])
def test_at_least_the_async_share_goes_to_async_twins_whole_batches_at_once(n: int) -> None:
    jobs = plan_jobs(random.Random(f"{n}:jobs"), n)
    assert sum(j.asynchronous for j in jobs) >= ASYNC_SHARE * n
    if n >= 2000:
        assert {j.kind for j in jobs if j.asynchronous} == set(JOB_KINDS)
        assert any(not j.asynchronous for j in jobs)
    for batch in {j.batch for j in jobs if j.batch}:
        assert len({j.asynchronous for j in jobs if j.batch == batch}) == 1


def test_the_app_and_the_expectations_agree() -> None:
    source = Path(__file__).with_name("chaosapp.py").read_text()
    assert f"PATIENT = {PATIENT}" in source
    assert "@app.task(max_attempts=3, backoff=0.05)\ndef doomed" in source and JOB_KINDS["doomed"].max_attempts == 3
    assert "@app.task(max_attempts=3, backoff=0.05)\nasync def aio_doomed" in source
    for name, kind in JOB_KINDS.items():
        assert f"\ndef {name}(token" in source and f"\nasync def aio_{name}(token" in source
        if kind.queue != "default":
            assert f'queue="{kind.queue}"' in source


def test_the_key_cap_check_counts_clean_runs_and_sees_one_too_many() -> None:
    from .jobs import JobPlan
    from .key_checks import check_key_caps

    jobs = [JobPlan(i, "keyed", ("acct-0", 0.1), token=i) for i in range(4)]
    clean = {0: (1.0, 2.0), 1: (1.5, 2.5), 2: (2.6, 3.0)}
    runs = {t: [Run(t, 200 + t, 100, s, e, "ok")] for t, (s, e) in clean.items()}
    problems: list[str] = []
    assert "keyed acct-0=2" in check_key_caps(jobs, runs, [], problems.append) and problems == []
    # A third run at once is caught...
    runs[3] = [Run(3, 203, 100, 1.8, 1.9, "ok")]
    check_key_caps(jobs, runs, [], problems.append)
    assert len(problems) == 1 and problems[0].startswith(
        "KEY CAP EXCEEDED: keyed acct-0 had 3 keyed runs at once (key_concurrency=2); its clean runs: token 0"
    )
    # ...unless a fault hit it (a killed child's run may overlap the one that replaced it),
    # or it is another task's job with the same key (the cap is per task and key).
    async_job = JobPlan(3, "keyed", ("acct-0", 0.1), token=3, asynchronous=True)
    problems.clear()
    check_key_caps([*jobs[:3], async_job], runs, [], problems.append)
    assert problems == []
    kill = Fault(1, "child_kill", 1.85, 1.85, target=203)
    problems.clear()
    check_key_caps(jobs, runs, [kill], problems.append)
    assert problems == []


def test_the_shared_limit_check_counts_every_task_naming_it_and_sees_one_too_many() -> None:
    from .jobs import JobPlan
    from .key_checks import check_shared_cap

    jobs = [JobPlan(0, "screen_a", (0.1,), token=0), JobPlan(1, "screen_b", (0.1,), token=1)]
    jobs.append(JobPlan(2, "screen_a", (0.1,), token=2, asynchronous=True))
    runs = {0: [Run(0, 200, 100, 1.0, 2.0, "ok")], 1: [Run(1, 201, 100, 1.5, 2.5, "ok")]}
    runs[2] = [Run(2, 202, 100, 2.6, 3.0, "ok")]
    problems: list[str] = []
    assert "most at once 2 (cap 2)" in check_shared_cap(jobs, runs, [], problems.append) and problems == []
    runs[2] = [Run(2, 202, 100, 1.8, 1.9, "ok")]  # a third at once, of a third task naming the limit
    check_shared_cap(jobs, runs, [], problems.append)
    assert len(problems) == 1 and problems[0].startswith("SHARED LIMIT EXCEEDED: 3 runs at once")
    problems.clear()
    check_shared_cap(jobs, runs, [Fault(1, "child_kill", 1.85, 1.85, target=202)], problems.append)
    assert problems == []
