"""After the storm: what ran, what each job ended as, and whether each extra run is explained.

A job's *extra runs* are its runs beyond what its design needs (1 for most,
fails+1 for the flaky ones, 3 for the doomed, 2 for crash_once).  The
delivery promise allows an extra run only when an earlier run of the same
job was cut short, or could not report, because of an injected fault:

* ``child_kill`` of the child running it, or ``worker_kill`` of its
  supervisor, between its start and shortly after its end (the outcome may
  not have reached Redis yet);
* ``worker_term`` of its supervisor while it ran, with the run still going
  (or just ending) when the grace period ran out;
* ``redis_restart`` / ``redis_pause`` overlapping it: heartbeats stop, leases
  expire, and an outcome recorded but not acknowledged may be retried;
* a worker that exited unexpectedly (a bug, reported separately) while it ran;
* a designed crash (``crash_once``) in another lane of the same threaded child
  (``-t``) while it ran: a crash takes every lane of its process down.

Each such *disrupted* run explains one extra run of its job; every extra run
beyond the disrupted ones is unexplained.

Workflow steps are held to the same rules, and to one more: a step is
*stored* once (its successor or follow-up enqueued exactly once). Every
claim counts an attempt, so a step's runs show attempt 1 once, unless a
run of attempt 1 was disrupted: a ``worker_term`` past its grace gives the
job back interrupted (``requeue``, attempts - 1), and a run lost with its
worker (a kill, a crash in another lane, a lease expired in a Redis outage)
is a worker loss that refunds its attempt too; the next claim is attempt 1
again. Any other attempt 1 after the first is a second enqueue.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import taskforge.broker

from .faults import GRACE, Fault

KEYSPACE_DOC = Path(taskforge.broker.__file__).parent / "lua" / "README.md"

PRE = 0.25  # clock reading noise: the claim precedes the run's own start record by a little
ACK_SLACK = 2.0  # from a run's end record to its outcome reaching Redis, on a busy 2-core box
# A run that ends within the grace period acks at once; only one ending this close to its
# expiry may have been killed before its outcome was written.
TERM_ACK_SLACK = 1.0
LANE_EXIT = 0.5  # from a crash run's last record to its process being gone, on a busy box
LANE_RECORD = 0.1  # from a run's end record to its lane writing the outcome, no fault in between
UNKNOWN_END = 1.5  # a run with no end record and no kill to blame: assume it lasted this long


@dataclass
class Run:
    token: int | str  # a job's token, or a workflow step's job id
    pid: int
    ppid: int
    start: float
    end: float | None = None
    outcome: str | None = None  # ok | raise | crash | None (never ended: killed)
    attempt: int | None = None  # recorded by workflow steps only

    def describe(self) -> str:
        end = f"{self.end:.3f}" if self.end is not None else "never"
        return f"pid {self.pid} (supervisor {self.ppid}) {self.start:.3f}..{end} {self.outcome or 'cut short'}"


def parse_runs(token: int | str, runs: list[bytes], ends: list[bytes]) -> list[Run]:
    """Pair each start record with the end record of the same process that follows it.

    A start record is "<pid>:<ppid>:<time>", with ":<attempt>" for a workflow step.
    """
    parsed = []
    for raw in runs:
        pid, ppid, start, *attempt = raw.decode().split(":")
        parsed.append(Run(token, int(pid), int(ppid), float(start), attempt=int(attempt[0]) if attempt else None))
    parsed.sort(key=lambda r: r.start)
    by_pid: dict[int, list[tuple[float, str]]] = defaultdict(list)
    for raw in ends:
        pid, t, outcome = raw.decode().split(":")
        by_pid[int(pid)].append((float(t), outcome))
    for pid_ends in by_pid.values():
        pid_ends.sort()
    for i, run in enumerate(parsed):
        later = [r.start for r in parsed[i + 1 :] if r.pid == run.pid]
        limit = later[0] if later else float("inf")
        for j, (t, outcome) in enumerate(by_pid.get(run.pid, [])):
            if run.start - 0.001 <= t <= limit:
                run.end, run.outcome = t, outcome
                del by_pid[run.pid][j]
                break
    return parsed


def disruption(
    run: Run, faults: list[Fault], crashes: list[tuple[int, float]] = (), lane_crashes: list[Run] = ()
) -> str | None:
    """The fault that cut ``run`` short or hid its outcome, or None.

    One that hit the run itself is preferred to one only within the slack
    around it, so the report names the likelier culprit.
    """
    return (
        _disruption(run, faults, crashes, 0.0, 0.0)
        or _disruption(run, faults, crashes, PRE, ACK_SLACK)
        or _lane_crash(run, lane_crashes)
    )


def _lane_crash(run: Run, lane_crashes: list[Run]) -> str | None:
    """A crash run of another job that overlapped ``run`` in the same process.

    Runs of one single-lane child never overlap (a job is recorded before
    the next one starts), so this explains nothing there.
    """
    for crash in lane_crashes:
        # The crash record comes just before os._exit: a lane may start a run in between.
        if (
            crash.pid == run.pid
            and crash.token != run.token
            and crash.end is not None
            and run.start <= crash.end + LANE_EXIT
            # A run that ended just before the crash started may not have been recorded yet.
            and (run.end is None or run.end + LANE_RECORD >= crash.start)
        ):
            return f"lane_crash of token {crash.token} in child {crash.pid}"
    return None


def _disruption(run: Run, faults: list[Fault], crashes: list[tuple[int, float]], pre: float, ack: float) -> str | None:
    hi = (run.end if run.end is not None else float("inf")) + ack
    for f in faults:
        if f.kind == "child_kill" and f.target == run.pid and run.start - pre <= f.t_start <= hi:
            return f"child_kill #{f.number}"
        # From the signal until the children were seen gone (t_end): a run started in between is cut short too.
        if f.kind == "worker_kill" and f.target == run.ppid and run.start - pre <= f.t_end and f.t_start <= hi:
            return f"worker_kill #{f.number}"
        term_hi = (run.end if run.end is not None else float("inf")) + min(ack, TERM_ACK_SLACK)
        if f.kind == "worker_term" and f.target == run.ppid and run.start <= f.t_start + GRACE <= term_hi:
            return f"worker_term #{f.number} (past grace)"
        if f.kind in ("redis_restart", "redis_pause"):
            end = run.end if run.end is not None else run.start + UNKNOWN_END
            if f.t_start <= end + ack and f.t_end >= run.start - pre:
                return f"{f.kind} #{f.number}"
    for supervisor, noticed in crashes:
        # Generous on purpose: the crash itself fails the test; this only keeps its
        # consequences from being counted twice.
        if supervisor == run.ppid and run.start <= noticed:
            return f"worker_crash of supervisor {supervisor}"
    return None


@dataclass
class Verdict:
    extra: int = 0
    explained: int = 0
    unexplained: int = 0
    reasons: list[tuple[Run, str]] = field(default_factory=list)  # each disrupted run, and by what


def classify(
    runs: list[Run],
    designed: int,
    faults: list[Fault],
    crashes: list[tuple[int, float]] = (),
    lane_crashes: list[Run] = (),
) -> Verdict:
    verdict = Verdict(extra=max(0, len(runs) - designed))
    if not verdict.extra:
        return verdict
    for run in runs:
        reason = disruption(run, faults, crashes, lane_crashes)
        if reason:
            verdict.reasons.append((run, reason))
    verdict.explained = min(verdict.extra, len(verdict.reasons))
    verdict.unexplained = verdict.extra - verdict.explained
    return verdict


@dataclass
class Restarts:
    """A step's runs at attempt 1 beyond the first: each a second store, unless given back."""

    again: int = 0
    unexplained: int = 0
    reasons: list[tuple[Run, str]] = field(default_factory=list)


def restarts(
    runs: list[Run], faults: list[Fault], crashes: list[tuple[int, float]] = (), lane_crashes: list[Run] = ()
) -> Restarts:
    """Count the times a step started over at attempt 1, and those no disrupted run explains (given back
    interrupted, or lost with its worker: either refunds the attempt)."""
    firsts = sorted((r for r in runs if r.attempt == 1), key=lambda r: r.start)
    found = Restarts(again=max(0, len(firsts) - 1))
    for run in firsts[:-1]:  # the last one started over nothing
        reason = disruption(run, faults, crashes, lane_crashes)
        if reason:
            found.reasons.append((run, reason))
    found.unexplained = max(0, found.again - len(found.reasons))
    return found


def documented_keyspace(doc: str | None = None) -> list[tuple[re.Pattern[str], str]]:
    """The keyspace table of taskforge/broker/lua/README.md, as (pattern, Redis type).

    Read from the documentation itself, so the check follows the documentation:
    a key the code writes without documenting it is a finding.
    """
    text = doc if doc is not None else KEYSPACE_DOC.read_text(encoding="utf-8")
    rows = re.findall(r"^\|?\s*`?(taskforge:[^\s`]+)`?\s*\|?\s*(hash|zset|string|list|set|stream)\s", text, re.M)
    table = []
    for template, kind in rows:
        regex = ""
        for part in re.split(r"(\{q\}|<[^>]+>)", template):
            if part == "{q}":
                regex += r"\{(?P<q>[^{}]+)\}"
            elif part.startswith("<"):
                regex += r".+"
            else:
                regex += re.escape(part)
        table.append((re.compile(regex), kind))
    return table


def keyspace_violation(
    key: str, kind: str, queues: set[str], table: list[tuple[re.Pattern[str], str]] | None = None
) -> str | None:
    """Why ``key`` (of Redis type ``kind``) is outside the documented keyspace, or None.

    The first row the key fits decides, unless a later row fits it better: a
    queue's ``taskforge:{q}:running`` also matches the index of workflows,
    ``taskforge:{workflows}:running``, which no queue named "workflows" made.
    """
    why = None
    for pattern, expected in table if table is not None else documented_keyspace():
        m = pattern.fullmatch(key)
        if not m:
            continue
        if kind != expected:
            why = why or f"{key}: a {kind}, documented as a {expected}"
        elif "q" in m.groupdict() and m["q"] not in queues:
            why = why or f"{key}: queue {m['q']!r} is none of {sorted(queues)}"
        else:
            return None
    return why or f"{key}: not in the documented keyspace ({kind})"
