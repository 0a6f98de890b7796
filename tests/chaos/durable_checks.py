"""Durable jobs under faults: no finished step ever ran again, and no stream item went missing or came twice.

The ``durable`` jobs (chaosapp: three steps, items streamed inside and after
each, a durable sleep before the last) leave side records of every step's
work starting and ending, of the value each ``step()`` call returned (the run
whose result is stored), and of each item once ``stream()`` returned for it.
Live readers (``StreamReaders``) follow the jobs' streams through the storm
with ``JobHandle.stream()``, as a web page following a job would.

Checked afterwards, against the record and the stream in the queue's Redis:

- every step is stored, and a step's work never started after the run that
  stored it had its ``step()`` call return (a step runs again only while no
  run has stored it: a run cut short, or fenced out, may have run it first);
- every run got the stored result back from each step it passed;
- the stream holds every item a run was told was written, each once, each
  run's items in the order it wrote them; its count in the record is right;
- each live reader saw exactly the stream, in order: nothing missed across
  a Redis restart or pause, nothing repeated.
"""

from __future__ import annotations

import threading
import time
import traceback
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

import redis

from taskforge import TaskForge
from taskforge.handle import JobHandle
from taskforge.serialization import loads

from .jobs import JobPlan

READERS = 4
READ_TIMEOUT = 300.0  # per item: a job may wait in line a long time while Redis restarts


class StreamReaders:
    """A few threads, each following the streams of the durable jobs in turn, from the first item."""

    def __init__(self, url: str, jobs: list[JobPlan], log: Callable[[str], None]) -> None:
        self.app = TaskForge("chaos-readers", broker=url)
        self.jobs = [job for job in jobs if job.kind == "durable"]
        self.log = log
        self.seen: dict[int, list[str]] = {}  # job index -> the items its reader got, in order
        self.errors: dict[int, str] = {}
        self.producing = threading.Event()  # set while the producer may still acknowledge jobs
        self.producing.set()
        self.next = 0
        self.lock = threading.Lock()
        self.threads = [
            threading.Thread(target=self.run, name=f"chaos-reader-{n}", daemon=True) for n in range(READERS)
        ]

    def start(self) -> None:
        for thread in self.threads:
            thread.start()

    def join(self, timeout: float) -> list[str]:
        """Wait for the readers; what they could not finish, as problems."""
        deadline = time.monotonic() + timeout
        for thread in self.threads:
            thread.join(max(0.1, deadline - time.monotonic()))
        problems = [f"stream reader of job {i}: {error}" for i, error in sorted(self.errors.items())]
        if any(thread.is_alive() for thread in self.threads):
            problems.append(f"stream readers still reading after {timeout:.0f} s")
        return problems

    def take(self) -> JobPlan | None:
        with self.lock:
            if self.next >= len(self.jobs):
                return None
            job = self.jobs[self.next]
            self.next += 1
            return job

    def run(self) -> None:
        while (job := self.take()) is not None:
            while job.job_id is None and self.producing.is_set():
                time.sleep(0.05)
            if job.job_id is None:
                continue  # never acknowledged: not owed to anyone
            items: list[str] = []
            try:
                for item in JobHandle(self.app, job.job_id, "default").stream(timeout=READ_TIMEOUT):
                    items.append(item)
            except Exception:
                self.errors[job.index] = traceback.format_exc(limit=3)
            self.seen[job.index] = items


@dataclass
class StepRecord:
    kind: str  # start | end | kept
    step: int
    run: int
    at: float
    value: int | None = None  # kept: the run whose result is stored


@dataclass
class DurableTally:
    jobs: int = 0
    steps_again: int = 0  # step work that started again before any run stored it (allowed)
    items: int = 0
    rerun_items: int = 0  # items streamed again by a later run (by design)
    read: int = 0
    problems: list[str] = field(default_factory=list)

    def line(self) -> str:
        return (
            f"durable jobs: {self.jobs}, step work redone before it was stored: {self.steps_again}, "
            f"stream items: {self.items} (of which streamed again by a later run: {self.rerun_items}), "
            f"streams followed live: {self.read}"
        )


def parse_steps(raw: list[bytes]) -> list[StepRecord]:
    found = []
    for entry in raw:
        kind, *rest = entry.decode().split(":")
        if kind == "kept":
            step, value, run, at = rest
            found.append(StepRecord(kind, int(step), int(run), float(at), int(value)))
        else:
            step, run, at = rest
            found.append(StepRecord(kind, int(step), int(run), float(at)))
    return found


def check_steps(job: JobPlan, fields: dict[bytes, bytes], records: list[StepRecord], tally: DurableTally) -> None:
    label = f"durable job {job.job_id} (token {job.token})"
    for n in range(3):
        raw = fields.get(f"step:s{n}".encode())
        if raw is None:
            tally.problems.append(f"{label}: step s{n} is not stored")
            continue
        stored = int(loads(raw))
        kept = [r for r in records if r.kind == "kept" and r.step == n]
        wrong = [r for r in kept if r.value != stored]
        if wrong:
            tally.problems.append(f"{label}: step s{n} stored run {stored}'s result, yet runs got {wrong}")
        by_storer = [r.at for r in kept if r.run == stored]
        if not by_storer:
            continue  # its storer was cut short between storing and recording: no bound to check against
        starts = [r for r in records if r.kind == "start" and r.step == n]
        again = [r for r in starts if r.at > min(by_storer)]
        if again:
            tally.problems.append(
                f"STEP RAN AGAIN: {label}: step s{n} was stored by run {stored} "
                f"(its step() returned at {min(by_storer):.6f}), yet its work started again: {again}"
            )
        tally.steps_again += max(0, len(starts) - 1)


def check_stream(
    job: JobPlan, fields: dict[bytes, bytes], stream: list[str], written: list[str], tally: DurableTally
) -> None:
    label = f"durable job {job.job_id} (token {job.token})"
    counts = Counter(stream)
    repeated = sorted(item for item, n in counts.items() if n > 1)
    if repeated:
        tally.problems.append(f"STREAM ITEM REPEATED: {label}: {repeated} in {stream}")
    missing = [item for item in written if item not in counts]
    if missing:
        tally.problems.append(f"STREAM ITEM MISSING: {label}: written {missing}, stream holds {stream}")
    order: dict[str, list[str]] = defaultdict(list)
    for item in stream:
        order[item.split(":")[0]].append(item)
    for run, items in order.items():
        written_by_run = [item for item in written if item.split(":")[0] == run]
        if [item for item in items if item in written_by_run] != written_by_run:
            tally.problems.append(f"{label}: run {run}'s items out of order: wrote {written_by_run}, stream {items}")
    length = int(fields.get(b"stream_length", b"0") or 0)
    if length != len(stream):
        tally.problems.append(f"{label}: its record counts {length} stream items, the stream holds {len(stream)}")
    tally.items += len(stream)
    after = [item.split(":after")[1] for item in stream if ":after" in item]
    tally.rerun_items += len(after) - len(set(after))


def check_durable(
    client: redis.Redis,
    side: redis.Redis,
    prefix: str,
    jobs: list[JobPlan],
    records: dict,
    readers: StreamReaders,
) -> DurableTally:
    tally = DurableTally()
    for job in jobs:
        if job.kind != "durable" or job.token is None or job.job_id is None:
            continue
        tally.jobs += 1
        fields = records.get(job.job_id) or {}
        if fields.get(b"state") != b"succeeded":
            continue  # check_outcomes reports it
        steps = parse_steps(side.lrange(f"{prefix}dsteps:{job.token}", 0, -1))
        check_steps(job, fields, steps, tally)
        entries = client.xrange(f"taskforge:{{default}}:stream:{job.job_id}")
        stream = [loads(item[b"v"]) for _, item in entries]
        written = [raw.decode() for raw in side.lrange(f"{prefix}dstream:{job.token}", 0, -1)]
        check_stream(job, fields, stream, written, tally)
        seen = readers.seen.get(job.index)
        if seen is None:
            tally.problems.append(f"durable job {job.job_id}: no reader followed its stream")
        elif seen != stream:
            tally.problems.append(
                f"STREAM READER MISSED OR REPEATED: durable job {job.job_id}: the reader got {seen}, the stream "
                f"holds {stream}"
            )
        else:
            tally.read += 1
    return tally
