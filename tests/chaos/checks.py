"""The checks after the storm, each a small function adding to one Report."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import redis

from taskforge import TaskForge
from taskforge.serialization import loads_call

from .analysis import Run, classify, documented_keyspace, keyspace_violation, parse_runs
from .dependencies import check_dependencies, designed_final
from .durable_checks import StreamReaders, check_durable
from .faults import KINDS as FAULT_KINDS
from .faults import FaultDriver
from .flow_checks import Flow, FlowTally, check_flows, read_flows, stale_entries, workflow_results
from .flows import FlowPlan, FlowProducer
from .index_checks import check_index
from .jobs import KINDS, JobPlan
from .key_checks import check_key_caps, check_shared_cap
from .procs import WorkerProcess, tracebacks
from .producer import Producer

QUEUES = {kind.queue for kind in KINDS.values()}
FINAL = {"succeeded", "dead", "cancelled"}
UNFINISHED_SETS = ("pending", "scheduled", "running", "deferred")
FLOW_ENDS = ("succeeded", "dead", "cancelled", "running")


@dataclass
class Report:
    path: Path
    problems: list[str] = field(default_factory=list)
    details: list[str] = field(default_factory=list)
    reasons: Counter[str] = field(default_factory=Counter)  # what explained the extra runs
    summary: str = ""
    stats: str = ""

    def problem(self, text: str) -> None:
        self.problems.append(text)

    def failure_message(self) -> str:
        shown = "\n".join(self.problems[:25])
        more = f"\n... and {len(self.problems) - 25} more" if len(self.problems) > 25 else ""
        return f"{self.summary}\n{shown}{more}\nfull report: {self.path}"

    def write(self, fault_lines: list[str]) -> None:
        self.path.write_text(
            "\n".join(
                [
                    self.summary,
                    self.stats,
                    "",
                    "PROBLEMS:",
                    *self.problems,
                    "",
                    "EXTRA RUNS:",
                    *self.details,
                    "",
                    "FAULTS:",
                    *fault_lines,
                ]
            )
            + "\n"
        )


def job_key(queue: str, job_id: str) -> str:
    return f"taskforge:{{{queue}}}:job:{job_id}"


def unfinished_ids(client: redis.Redis) -> int:
    pipe = client.pipeline(transaction=False)
    for queue in sorted(QUEUES):
        for part in UNFINISHED_SETS:
            pipe.zcard(f"taskforge:{{{queue}}}:{part}")
    return sum(pipe.execute())


def unfinished_jobs(client: redis.Redis, jobs: list[JobPlan]) -> int:
    pipe = client.pipeline(transaction=False)
    for job in jobs:
        pipe.hget(job_key(KINDS[job.kind].queue, job.job_id or "?"), "state")
    return sum(1 for state in pipe.execute() if (state or b"").decode() not in FINAL)


# -- the queue's Redis ---------------------------------------------------------------


def check_keyspace(client: redis.Redis, report: Report) -> list[str]:
    """Every key documented in taskforge/broker/keys.py; returns the job hash keys."""
    keys = sorted(k.decode() for k in client.scan_iter(match="*", count=1000))
    pipe = client.pipeline(transaction=False)
    for key in keys:
        pipe.type(key)
    types = [t.decode() for t in pipe.execute()]
    table = documented_keyspace()
    for key, kind in zip(keys, types, strict=True):
        why = keyspace_violation(key, kind, QUEUES, table)
        if why:
            report.problem(f"keyspace: {why}")
    return [k for k, t in zip(keys, types, strict=True) if ":job:" in k and t == "hash"]


def check_turns_left(url: str, client: redis.Redis, report: Report) -> None:
    """Drained, no key has a job waiting, so every key's turn entry is stale: the reclaim's sweeps delete them all."""
    checker = TaskForge("chaos-check", broker=url)
    for queue in sorted(QUEUES):
        for _ in range(20):  # each sweep looks at about a thousand entries
            checker.broker.claims.reclaim(queue)
        left = client.hlen(f"taskforge:{{{queue}}}:key_turns")
        if left:
            report.problem(f"{queue}: {left} key turn entries left behind once the queue drained and was swept")


def read_records(client: redis.Redis, job_keys: list[str], report: Report) -> tuple[dict, dict[str, int]]:
    """Every job record, and the token each plain job carries; none may still be claimed.

    Workflow steps (a ``workflow`` field) carry no token: flow_checks reads them by id.
    """
    pipe = client.pipeline(transaction=False)
    for key in job_keys:
        pipe.hgetall(key)
    records: dict[str, dict[bytes, bytes]] = {}
    token_of: dict[str, int] = {}
    for key, fields in zip(job_keys, pipe.execute(), strict=True):
        job_id = key.rsplit(":", 1)[1]
        records[job_id] = fields
        try:
            if not fields.get(b"workflow"):
                args, _ = loads_call(fields.get(b"payload", b""))
                token_of[job_id] = int(args[0])
        except Exception as exc:  # noqa: BLE001 - reported, never raised
            report.problem(f"job {job_id}: unreadable record {fields!r}: {exc}")
        if fields.get(b"state") == b"running" or fields.get(b"token"):
            report.problem(
                f"job {job_id}: still claimed after the drain: state {fields.get(b'state')!r}, "
                f"token {fields.get(b'token')!r}"
            )
    for queue in sorted(QUEUES):
        for part in UNFINISHED_SETS:
            left = client.zrange(f"taskforge:{{{queue}}}:{part}", 0, -1)
            if left:
                report.problem(f"{queue} {part} still holds {len(left)} ids: {left[:5]}")
    return records, token_of


# -- the side Redis --------------------------------------------------------------------


def read_runs(side: redis.Redis, prefix: str, tokens: list[int]) -> dict[int, list[Run]]:
    pipe = side.pipeline(transaction=False)
    for token in tokens:
        pipe.lrange(f"{prefix}runs:{token}", 0, -1)
        pipe.lrange(f"{prefix}ends:{token}", 0, -1)
    raw = pipe.execute()
    return {t: parse_runs(t, raw[2 * i], raw[2 * i + 1]) for i, t in enumerate(tokens)}


# -- jobs ---------------------------------------------------------------------------------


def check_outcomes(
    jobs: list[JobPlan], records: dict, token_of: dict[str, int], runs: dict[int, list[Run]], report: Report
) -> int:
    """Every acknowledged job final, as designed, with its side effect; returns how many were lost."""
    lost = 0
    for job in jobs:
        fields = records.get(job.job_id or "")
        if job.token is None or fields is None:
            lost += 1
            report.problem(f"LOST: job {job.index} ({job.kind}) id {job.job_id} token {job.token}: no record")
            continue
        state = fields.get(b"state", b"").decode()
        error = fields.get(b"error", b"").decode()[:300]
        ran = "; ".join(r.describe() for r in runs[job.token]) or "none"
        if token_of.get(job.job_id or "") != job.token:
            report.problem(f"job {job.job_id}: record carries token {token_of.get(job.job_id or '')}, sent {job.token}")
        if state not in FINAL:
            lost += 1
            report.problem(
                f"LOST: job {job.job_id} ({job.kind}, token {job.token}) is still {state!r}: {error}; runs: {ran}"
            )
        elif state != designed_final(job, jobs):
            report.problem(
                f"job {job.job_id} ({job.kind}, token {job.token}) ended {state}, designed to end "
                f"{designed_final(job, jobs)}: {error}; runs: {ran}"
            )
        if state == "succeeded" and not any(r.outcome == "ok" for r in runs[job.token]):
            lost += 1
            report.problem(
                f"LOST: job {job.job_id} ({job.kind}, token {job.token}) succeeded but its side "
                f"effect never happened; runs: {ran}"
            )
    return lost


def check_phantoms(jobs: list[JobPlan], records: dict, token_of: dict[str, int], report: Report) -> int:
    """Jobs stored by an enqueue call that failed: not owed to anyone, but they must finish too."""
    acknowledged = {job.token for job in jobs}
    phantoms = 0
    for job_id, token in token_of.items():
        if token in acknowledged:
            continue
        phantoms += 1
        state = records[job_id].get(b"state", b"").decode()
        if state not in FINAL:
            report.problem(f"phantom job {job_id} (token {token}, from a failed enqueue call) is stuck {state!r}")
    return phantoms


def count_duplicates(
    driver: FaultDriver,
    producer: Producer,
    jobs: list[JobPlan],
    token_of: dict[str, int],
    runs: dict[int, list[Run]],
    report: Report,
) -> tuple[int, int]:
    crashes = [(x.worker.pid, x.at) for x in driver.unexpected if not x.refused]
    lane_crashes = [r for token_runs in runs.values() for r in token_runs if r.outcome == "crash"]
    explained = unexplained = 0
    for job_id, token in sorted(token_of.items(), key=lambda item: item[1]):
        job = jobs[producer.token_owner[token]]
        verdict = classify(
            runs[token], KINDS[job.kind].designed_runs(job.args(token)), driver.faults, crashes, lane_crashes
        )
        explained += verdict.explained
        unexplained += verdict.unexplained
        if not verdict.extra:
            continue
        report.reasons.update(reason.split()[0] for _, reason in verdict.reasons[: verdict.extra])
        line = (
            f"job {job_id} ({job.kind}{' ' + repr(job.extra) if job.extra else ''}, token {token}): "
            f"{len(runs[token])} runs, {verdict.extra} extra, {verdict.unexplained} unexplained\n    runs: "
            + "\n          ".join(r.describe() for r in runs[token])
            + "\n    disrupted: "
            + ("; ".join(f"{r.pid}@{r.start:.3f} by {why}" for r, why in verdict.reasons) or "none")
        )
        report.details.append(line)
        if verdict.unexplained:
            report.problem("UNEXPLAINED DUPLICATE: " + line + "\n" + context(driver, job_id, runs[token]))
    for token, token_runs in runs.items():
        if token_runs and token not in token_of.values():
            report.problem(f"token {token} ran but no job record carries it")
    return explained, unexplained


def context(driver: FaultDriver, job_id: str, runs: list[Run]) -> str:
    """What a reader needs to diagnose one duplicate: nearby faults and the workers' lines about the job."""
    lo = min(r.start for r in runs) - 15
    hi = max((r.end or r.start) for r in runs) + 15
    near = [f"      {f.line()}" for f in driver.faults if f.t_end >= lo and f.t_start <= hi]
    lines = [f"      {w}: {line}" for w in driver.workers for line in w.output().splitlines() if job_id in line]
    return "    faults nearby:\n" + ("\n".join(near) or "      none") + "\n    worker log:\n" + "\n".join(lines)


# -- processes and faults ---------------------------------------------------------------------


def check_workers(driver: FaultDriver, report: Report) -> None:
    for exit_ in driver.unexpected:
        if not exit_.refused:
            what = (
                "crashed (and hung: multiprocessing's atexit joins its children, which run on unsupervised)"
                if exit_.code is None
                else f"exited unexpectedly with code {exit_.code}"
            )
            report.problem(f"{exit_.worker} {what}; see {exit_.worker.log_path}")
    errors: dict[tuple[str, str, str], list[WorkerProcess]] = defaultdict(list)
    for worker in driver.workers:
        code = worker.proc.poll()
        if code is None:
            report.problem(f"{worker} still running at the end, though it was sent {worker.signalled}")
        elif worker.signalled == "SIGTERM" and code != 0 and not (code == -15 and not worker.output().strip()):
            # (-15 with no output at all: stopped while Python itself was starting, before any
            # taskforge code ran, so before anything could be claimed.)
            report.problem(f"{worker} exited with {code} after SIGTERM (expected 0)")
        for owner, where, error in tracebacks(worker.output()):
            if owner == "spawn" and worker.signalled == "SIGKILL":
                continue  # its supervisor was SIGKILLed while handing it its start-up data
            if owner == "child" and ("BrokenPipeError" in error or not error) and worker.signalled == "SIGKILL":
                # Its supervisor was SIGKILLed: the kernel closes the supervisor's end of the
                # pipe a moment before it delivers the children's PDEATHSIG.  A child that
                # outlived its supervisor for real is caught by check_orphans instead.  (No
                # error line: the PDEATHSIG arrived while it was printing the traceback.)
                continue
            errors[(owner, where, error)].append(worker)
    for (owner, where, error), workers in errors.items():
        report.problem(
            f"uncaught error in a {owner} at {where}: {error} ({len(workers)}x, in "
            f"{', '.join(sorted({w.log_path.name for w in workers}))})"
        )


def check_orphans(driver: FaultDriver, side: redis.Redis, prefix: str, report: Report) -> None:
    """No worker child may outlive its supervisor, let alone go on to take jobs.

    Every process that imports the app records its parent: a child that loads
    the app with a parent other than one of our supervisors is an orphan
    about to claim jobs nobody will renew.
    """
    supervisors = {w.pid for w in driver.workers}
    for raw in side.lrange(f"{prefix}imports", 0, -1):
        pid, ppid, at = raw.decode().split(":")
        if int(pid) not in supervisors and int(ppid) not in supervisors:
            report.problem(
                f"orphan: worker child {pid} loaded the app at {float(at):.3f} with parent {ppid}: its "
                "supervisor was already dead, and it went on to take jobs (PDEATHSIG not armed)"
            )
    for orphan in driver.orphans_seen:
        report.problem(f"orphan: {orphan}")
    orphans = driver.orphans()
    if orphans:
        report.problem(f"orphan processes outlived their worker: {orphans}")


def check_fault_counts(driver: FaultDriver, wanted: int, report: Report) -> Counter[str]:
    counts = Counter(f.kind for f in driver.faults)
    for kind in FAULT_KINDS:
        if counts[kind] < wanted:
            report.problem(f"only {counts[kind]} {kind} faults, wanted {wanted}")
    return counts


def check_workflows(
    url: str,
    client: redis.Redis,
    side: redis.Redis,
    prefix: str,
    driver: FaultDriver,
    flows: list[FlowPlan],
    runs: dict[int, list[Run]],
    report: Report,
) -> FlowTally:
    """Every workflow stored, acknowledged or phantom: see flow_checks.py."""
    crashes = [(x.worker.pid, x.at) for x in driver.unexpected if not x.refused]
    lane_crashes = [r for token_runs in runs.values() for r in token_runs if r.outcome == "crash"]
    found = read_flows(client, side, prefix, flows)
    result_of, close = workflow_results(url)
    try:
        tally = check_flows(
            found, driver.faults, lane_crashes, crashes, result_of, report.problem, report.details, report.reasons
        )
    finally:
        close()
    stored = {flow.workflow_id for flow in found}
    for flow in flows:
        if flow.workflow_id is not None and flow.workflow_id not in stored:
            tally.lost += 1
            report.problem(f"LOST: workflow {flow.workflow_id} (#{flow.index} {flow.shape}): acknowledged, no record")
    check_step_runs(side, prefix, found, report)
    tally.stale = stale_entries(client, found)
    logs = [worker.output() for worker in driver.workers]
    tally.waited = sum(log.count("waits for the reconciler") for log in logs)
    tally.repaired = sum(log.count("left behind") + log.count("did not confirm") for log in logs)
    return tally


def check_step_runs(side: redis.Redis, prefix: str, found: list[Flow], report: Report) -> None:
    """Every step that ran belongs to a stored workflow: nothing ran that no record accounts for."""
    known = {step.job_id for flow in found for step in flow.steps}
    for key in side.scan_iter(match=f"{prefix}step:*", count=1000):
        job_id = key.decode()[len(f"{prefix}step:") :]
        if job_id not in known:
            report.problem(f"step {job_id} ran but no workflow record lists it")


def check_all(
    path: Path,
    seed: int,
    client: redis.Redis,
    side: redis.Redis,
    prefix: str,
    driver: FaultDriver,
    producer: Producer,
    jobs: list[JobPlan],
    faults_wanted: int,
    drained: bool,
    url: str,
    flow_producer: FlowProducer,
    readers: StreamReaders,
) -> Report:
    report = Report(path)
    if not drained:
        report.problem("the queue did not drain in time once the faults stopped (see the drain lines in faults.log)")
    job_keys = check_keyspace(client, report)
    records, token_of = read_records(client, job_keys, report)
    check_index(client, set(QUEUES), job_keys, records, report.problem)
    check_turns_left(url, client, report)
    runs = read_runs(side, prefix, sorted(producer.token_owner))
    lost = check_outcomes(jobs, records, token_of, runs, report)
    dependents = check_dependencies(jobs, runs, report.problem)
    phantoms = check_phantoms(jobs, records, token_of, report)
    explained, unexplained = count_duplicates(driver, producer, jobs, token_of, runs, report)
    flows = check_workflows(url, client, side, prefix, driver, flow_producer.flows, runs, report)
    key_caps = check_key_caps(jobs, runs, driver.faults, report.problem)
    key_caps += "; " + check_shared_cap(jobs, runs, driver.faults, report.problem)
    for line in readers.join(60):
        report.problem(line)
    durable = check_durable(client, side, prefix, jobs, records, readers)
    for line in durable.problems:
        report.problem(line)
    check_workers(driver, report)
    check_orphans(driver, side, prefix, report)
    counts = check_fault_counts(driver, faults_wanted, report)
    faults = ", ".join(f"{k}: {counts[k]}" for k in FAULT_KINDS)
    acknowledged = sum(1 for job in jobs if job.token is not None)
    asynchronous = sum(1 for job in jobs if job.token is not None and job.asynchronous)
    ended = ", ".join(f"{state}={flows.ended[state]}" for state in FLOW_ENDS if flows.ended.get(state)) or "none"
    report.summary = (
        f"chaos: seed={seed} jobs={acknowledged} (async={asynchronous}) workflows={flows.sent} ({ended}) "
        f"faults={{{faults}}} "
        f"successors enqueued once={flows.successors_once}/{flows.successors} "
        f"duplicates explained={explained + flows.explained} unexplained={unexplained + flows.unexplained} "
        f"lost={lost + flows.lost} dependents={dependents}"
    )
    refused = sum(1 for x in driver.unexpected if x.refused)
    report.stats = (
        f"extra runs explained by: {dict(report.reasons) or 'none'}; enqueue calls failed and retried: "
        f"{producer.failed_calls}, of which stored anyway (phantoms): {phantoms}; workers started: "
        f"{len(driver.workers)} ({refused} refused to start while Redis was down); runs recorded: "
        f"{sum(len(r) for r in runs.values())}; workflows: {flows.steps} steps, of which {flows.successors} "
        f"successors; step runs beyond design explained={flows.explained}, unexplained={flows.unexplained}; "
        f"attempt 1 again after a give-back={flows.restarts_explained}, unexplained={flows.restarts_unexplained}; "
        f"delay() calls failed and retried: {flow_producer.failed_calls}, stored anyway (phantoms): {flows.phantoms}; "
        f"step reports a fault kept from delivery: {flows.waited}, reports and launches the reconciler "
        f"repaired: {flows.repaired}; stale entries in the running index: {len(flows.stale)}; {key_caps}; "
        f"{durable.line()}"
    )
    report.details.extend(f"NOTE: {line}" for line in flows.stale)
    report.write([f.line() for f in driver.faults])
    return report
