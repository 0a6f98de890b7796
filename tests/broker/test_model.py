"""The queue against a plain-Python model of it, on memory:// and on real Redis.

Hypothesis drives random sequences of enqueue, schedule, claim, succeed, fail,
reclaim, requeue, extend, cancel and retry-dead through ``app.broker`` (and the
producer API), mirrors each one in a model, and after every step checks Redis
against the model: every job is in exactly the set its state implies, its hash
agrees on state, attempts and place in line, finished records expire and
unfinished ones do not, and each claim returns the job the model predicts
(strict priority, then first in first out).

The scripts read the clock from Redis ``TIME``, which a test cannot fake, so
time-dependent steps are made unambiguous instead: a delay or a lease is either
"near" (a few ms, and the step that depends on it first waits on Redis's clock
until it has certainly passed) or "far" (an hour, never reached in an example).
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from taskforge import TaskForge
from taskforge.broker.keys import QueueKeys, search_index
from taskforge.broker.queue import Claim, NewJob, new_token
from taskforge.broker.record import DEFAULT_MAX_ATTEMPTS
from taskforge.serialization import dumps_call
from tests.conftest import inspector

from .lost_reply import lose_reply

QUEUE = "model"
KEYS = QueueKeys(QUEUE)
BAND = 2**50  # lua/lib/keys.lua: pending score = (3 - priority) * BAND + seq
FAR_MS = 3_600_000
TINY_LEASE_MS = 1
UNFINISHED = ("pending", "scheduled", "retrying", "running")
EXAMPLES = 200

SETTINGS = settings(
    max_examples=EXAMPLES,
    stateful_step_count=25,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
    # No "explain" phase: it replays variations of a failure for minutes before
    # reporting it; the shrunk steps say enough.
    phases=[Phase.explicit, Phase.generate, Phase.target, Phase.shrink],
)

priorities = st.integers(min_value=0, max_value=3)
attempts = st.integers(min_value=1, max_value=3)
timings = st.sampled_from(["ready", "past", "near", "far_in", "far_at"])


@dataclass
class ModelJob:
    id: str
    priority: int
    max_attempts: int
    state: str
    attempts: int = 0
    seq: int | None = None  # the queue's enqueue counter when it last went to the back of the line
    due: int | None = None  # Redis ms, while scheduled or retrying
    far: bool = False  # due (or lease) an hour away: never reached within an example
    token: str | None = None
    lease_bound: int | None = None  # a tiny lease runs out by this Redis ms; None: a far lease
    unstarted: bool = False  # claimed after the first job of a claim, its start not said (settle)
    losses: int = 0  # runs whose lease expired under them: each a loss, not an attempt (max_worker_losses 2)


def redis_ms(app: TaskForge) -> int:
    seconds, micros = app.broker.client.time()
    return int(seconds) * 1000 + int(micros) // 1000


def wait_until(app: TaskForge, target_ms: int) -> None:
    """Sleep until Redis's clock reads at least ``target_ms``: every later script sees that too."""
    deadline = time.monotonic() + 2
    while redis_ms(app) < target_ms:
        assert time.monotonic() < deadline, f"Redis TIME never reached {target_ms}"
        time.sleep(0.0005)


class QueueMachine(RuleBasedStateMachine):
    """Subclassed per backend by the test, which supplies ``make_app``."""

    examples = 0

    def make_app(self) -> TaskForge:  # pragma: no cover - overridden
        raise NotImplementedError

    def __init__(self) -> None:
        super().__init__()
        type(self).examples += 1
        self.app = self.make_app()
        self.broker = self.app.broker
        self.task = self.app.tasks["model.job"]
        self.jobs: dict[str, ModelJob] = {}
        self.seq = 0  # mirrors taskforge:{q}:seq
        self.stale: list[tuple[str, str]] = []  # (id, token) of claims no longer held

    # -- the model's own transitions -------------------------------------

    def in_state(self, *states: str) -> list[ModelJob]:
        return [job for job in self.jobs.values() if job.state in states]

    def to_back_of_line(self, job: ModelJob) -> None:
        self.seq += 1
        job.state, job.seq, job.due, job.far, job.token = "pending", self.seq, None, False, None

    def back_in_place(self, job: ModelJob) -> None:
        job.state, job.due, job.far, job.token, job.lease_bound = "pending", None, False, None, None

    def release(self, job: ModelJob, state: str) -> None:
        assert job.token is not None
        self.stale.append((job.id, job.token))
        job.state, job.token, job.lease_bound = state, None, None

    def line(self) -> list[ModelJob]:
        """Pending jobs in the order workers must get them."""
        return sorted(self.in_state("pending"), key=lambda j: (-j.priority, j.seq))

    def scheduled_at(self, job_id: str) -> int:
        return int(self.broker.client.hget(KEYS.job(job_id), "scheduled_at"))

    def add(self, job_id: str, priority: int, max_attempts: int, timing: str) -> None:
        job = ModelJob(job_id, priority, max_attempts, "scheduled")
        self.jobs[job_id] = job
        if timing in ("ready", "past"):
            self.to_back_of_line(job)
        else:
            job.due, job.far = self.scheduled_at(job_id), timing != "near"

    # -- producers --------------------------------------------------------

    @rule(priority=priorities, max_attempts=attempts, timing=timings, near_ms=st.integers(1, 3))
    def enqueue_one(self, priority: int, max_attempts: int, timing: str, near_ms: int) -> None:
        task = self.task.with_options(priority=priority, max_attempts=max_attempts)
        if timing == "ready":
            handle = task.delay(priority)
        elif timing == "past":
            handle = task.apply_at(datetime(2001, 1, 1), priority)  # naive: UTC, long past
        elif timing == "near":
            handle = task.apply_in(near_ms / 1000, priority)
        elif timing == "far_in":
            handle = task.apply_in(timedelta(milliseconds=FAR_MS), priority)
        else:
            handle = task.apply_at(datetime.now(timezone.utc) + timedelta(milliseconds=FAR_MS), priority)
        self.add(handle.id, priority, max_attempts, timing)

    @initialize(batch=st.lists(st.tuples(priorities, attempts, timings, st.integers(1, 3)), max_size=4))
    def start_with_some_jobs(self, batch: list[tuple[int, int, str, int]]) -> None:
        if batch:
            self.enqueue_batch(batch)

    @rule(batch=st.lists(st.tuples(priorities, attempts, timings, st.integers(1, 3)), min_size=1, max_size=3))
    def enqueue_batch(self, batch: list[tuple[int, int, str, int]]) -> None:
        now = int(time.time() * 1000)
        jobs = []
        for priority, max_attempts, timing, near_ms in batch:
            due = {"past": 1_000, "far_at": now + FAR_MS}.get(timing)
            delay = {"near": near_ms, "far_in": FAR_MS}.get(timing, 0)
            jobs.append(
                NewJob(
                    id=uuid.uuid4().hex,
                    task="model.job",
                    payload=dumps_call((), {}),
                    priority=priority,
                    max_attempts=max_attempts,
                    due_ms=due,
                    delay_ms=delay,
                )
            )
        self.broker.jobs.enqueue(QUEUE, jobs)
        for job, (_, _, timing, _) in zip(jobs, batch, strict=True):
            self.add(job.id, job.priority, job.max_attempts, timing)

    # -- workers ----------------------------------------------------------

    def make_near_jobs_due(self) -> list[ModelJob]:
        near = [j for j in self.in_state("scheduled", "retrying") if not j.far]
        if near:
            wait_until(self.app, max(j.due for j in near))  # type: ignore[type-var]
        return near

    def expect_claims(
        self, near: list[ModelJob], count: int, lease: int, claims: list[Claim], wait: float | None
    ) -> None:
        """Mirror a claim (dequeue, or succeed_and_claim) and check what it returned."""
        after = redis_ms(self.app)
        # Promotion walks the scheduled zset by due time (ties: by member) and
        # sends each job to the back of its priority with a fresh sequence.
        for job in sorted(near, key=lambda j: (j.due, j.id)):
            self.to_back_of_line(job)
        expected = self.line()[:count]
        assert [c.id for c in claims] == [j.id for j in expected], "claimed out of priority/FIFO order"
        for place, (claim, job) in enumerate(zip(claims, expected, strict=True)):
            job.attempts += 1
            job.unstarted = place > 0  # a reclaim refunds its attempt until a settle says it started
            job.state, job.token = "running", claim.token
            job.lease_bound = after + lease if lease == TINY_LEASE_MS else None
            assert (claim.attempts, claim.max_attempts, claim.priority) == (
                job.attempts,
                job.max_attempts,
                job.priority,
            )
            assert claim.task == "model.job" and claim.queue == QUEUE
        if not claims:
            if self.in_state("scheduled", "retrying"):
                assert wait is not None and wait > 0
            else:
                assert wait is None

    @rule(count=st.integers(1, 3), tiny=st.booleans(), reply_lost=st.booleans())
    def dequeue(self, count: int, tiny: bool, reply_lost: bool) -> None:
        near = self.make_near_jobs_due()
        lease = TINY_LEASE_MS if tiny else FAR_MS
        token = new_token()
        if reply_lost:
            # The reply of the first call is lost; the client retries with the
            # same token: it must get the very same claims back, not claim more.
            lost = lose_reply(self.broker, lambda: self.broker.claims.dequeue(QUEUE, lease, count, token=token))
            claims, wait = self.broker.claims.dequeue(QUEUE, lease, count, token=token)
            assert [(c.id.decode(), int(c.attempts)) for c in lost.rows] == [(c.id, c.attempts) for c in claims]
        else:
            claims, wait = self.broker.claims.dequeue(QUEUE, lease, count, token=token)
        self.expect_claims(near, count, lease, claims, wait)

    @precondition(lambda self: self.in_state("running"))
    @rule(data=st.data(), tiny=st.booleans(), reply_lost=st.booleans())
    def succeed_and_claim(self, data: st.DataObject, tiny: bool, reply_lost: bool) -> None:
        job = self.pick_running(data)
        near = self.make_near_jobs_due()
        lease = TINY_LEASE_MS if tiny else FAR_MS
        token = new_token()

        def chained() -> tuple[bool, tuple[list[Claim], float | None]]:
            return self.broker.claims.succeed_and_claim(QUEUE, job.id, job.token, b"\xc0", lease, token)  # type: ignore[arg-type]

        if reply_lost:  # the re-send finds the success recorded (fenced) and gets the lost claim back
            lose_reply(self.broker, chained)
        done, (claims, wait) = chained()
        assert done is not reply_lost
        self.release(job, "succeeded")
        self.expect_claims(near, 1, lease, claims, wait)

    def pick_running(self, data: st.DataObject) -> ModelJob:
        return data.draw(st.sampled_from(self.in_state("running")))

    @precondition(lambda self: self.in_state("running"))
    @rule(data=st.data())
    def succeed(self, data: st.DataObject) -> None:
        job = self.pick_running(data)
        assert self.broker.claims.succeed(QUEUE, job.id, job.token, b"\xc0") is True
        self.release(job, "succeeded")

    @precondition(lambda self: self.in_state("running"))
    @rule(data=st.data(), retry=st.sampled_from([None, 0.0, 0.002, FAR_MS / 1000, FAR_MS / 1000]))
    def fail(self, data: st.DataObject, retry: float | None) -> None:
        job = self.pick_running(data)
        outcome = self.broker.claims.fail(QUEUE, job.id, job.token, "ValueError: model", "tb", retry)
        if retry is not None and job.attempts < job.max_attempts:
            assert outcome == "retrying"
            self.release(job, "retrying")
            job.due, job.far = self.scheduled_at(job.id), retry == FAR_MS / 1000
        else:
            assert outcome == "dead"
            self.release(job, "dead")

    @precondition(lambda self: self.in_state("running"))
    @rule(data=st.data())
    def say_started(self, data: st.DataObject) -> None:
        """A worker's lane says a job of its batch started (a settle with no result for it)."""
        job = self.pick_running(data)
        stale = data.draw(st.lists(st.sampled_from(self.stale), max_size=1)) if self.stale else []
        assert job.token is not None
        done, claimed = self.broker.claims.settle(QUEUE, [], started=[(job.id, job.token), *stale])
        assert (done, claimed) == ([], None)
        job.unstarted = False  # a stale claim's mark changes nothing (fenced)

    @precondition(lambda self: self.in_state("running"))
    @rule(data=st.data())
    def requeue(self, data: st.DataObject) -> None:
        job = self.pick_running(data)
        assert self.broker.claims.requeue(QUEUE, job.id, job.token) is True
        self.release(job, "pending")
        job.attempts -= 1  # a shutdown is not the job's fault: the attempt is refunded
        self.back_in_place(job)

    @rule()
    def reclaim(self) -> None:
        expiring = [j for j in self.in_state("running") if j.lease_bound is not None]
        if expiring:
            wait_until(self.app, max(j.lease_bound for j in expiring))  # type: ignore[type-var]
        back, buried, dropped = self.broker.claims.reclaim(QUEUE)
        expect_back = {j.id for j in expiring if j.losses < 2 or j.unstarted}
        expect_buried = {j.id for j in expiring if j.losses >= 2 and not j.unstarted}
        assert (set(back), set(buried), dropped) == (expect_back, expect_buried, 0)
        assert len(back) == len(expect_back) and len(buried) == len(expect_buried)
        for job in expiring:
            job.attempts -= 1  # a lost worker uses no attempt; a job never started did not run at all
            job.losses += not job.unstarted
            if job.id in expect_back:
                self.release(job, "pending")
                self.back_in_place(job)  # its old place in line
                job.unstarted = False
            else:
                self.release(job, "dead")

    @precondition(lambda self: self.in_state("running"))
    @rule(data=st.data(), tiny=st.booleans())
    def extend(self, data: st.DataObject, tiny: bool) -> None:
        running = self.in_state("running")
        chosen = data.draw(st.lists(st.sampled_from(running), min_size=1, unique_by=lambda j: j.id))
        stale = data.draw(st.lists(st.sampled_from(self.stale), max_size=2)) if self.stale else []
        lease = TINY_LEASE_MS if tiny else FAR_MS
        pairs = [(j.id, j.token) for j in chosen] + stale
        lost, aborted = self.broker.claims.extend(QUEUE, lease, pairs)  # type: ignore[arg-type]
        after = redis_ms(self.app)
        assert (lost, aborted) == ([i for i, _ in stale if self.jobs[i].state in UNFINISHED], [])
        for job in chosen:
            job.lease_bound = after + lease if tiny else None

    @precondition(lambda self: self.stale)
    @rule(data=st.data(), op=st.sampled_from(["succeed", "fail", "requeue", "extend"]))
    def stale_claim_is_fenced(self, data: st.DataObject, op: str) -> None:
        job_id, token = data.draw(st.sampled_from(self.stale))
        if op == "succeed":
            assert self.broker.claims.succeed(QUEUE, job_id, token, b"\xc0") is False
        elif op == "fail":
            assert self.broker.claims.fail(QUEUE, job_id, token, "late", "", 0) == "fenced"
        elif op == "requeue":
            assert self.broker.claims.requeue(QUEUE, job_id, token) is False
        else:
            # Lost (someone else may hold it now) unless it has finished: then nobody does.
            lost = [job_id] if self.jobs[job_id].state in UNFINISHED else []
            assert self.broker.claims.extend(QUEUE, FAR_MS, [(job_id, token)]) == (lost, [])

    # -- anyone -----------------------------------------------------------

    def pick_any(self, data: st.DataObject) -> ModelJob:
        """A job of a state drawn first, so that rare states (retrying, dead) are picked often."""
        states = list(dict.fromkeys(j.state for j in self.jobs.values()))
        return data.draw(st.sampled_from(self.in_state(data.draw(st.sampled_from(states)))))

    @rule(data=st.data())
    def cancel(self, data: st.DataObject) -> None:
        if not self.jobs or data.draw(st.integers(0, 9)) == 0:
            assert self.broker.jobs.cancel(QUEUE, uuid.uuid4().hex) == -1, "cancel of an unknown id"
            return
        job = self.pick_any(data)
        outcome = self.broker.jobs.cancel(QUEUE, job.id)
        if job.state in ("pending", "scheduled", "retrying"):
            assert outcome == 1
            job.state, job.due, job.far = "cancelled", None, False
        else:
            assert outcome == 0, f"cancel of a {job.state} job"

    @precondition(lambda self: self.in_state("scheduled", "retrying"))
    @rule(data=st.data())
    def cancel_before_due(self, data: st.DataObject) -> None:
        job = data.draw(st.sampled_from(self.in_state("scheduled", "retrying")))
        assert self.broker.jobs.cancel(QUEUE, job.id) == 1, f"cancel of a {job.state} job"
        job.state, job.due, job.far = "cancelled", None, False

    @precondition(lambda self: self.jobs)
    @rule(data=st.data())
    def retry_dead_by_id(self, data: st.DataObject) -> None:
        # Any jobs, dead or not, some twice: only a dead one moves, once, in the order given.
        asked = [self.pick_any(data).id for _ in range(data.draw(st.integers(1, 5)))]
        moved = self.broker.cleanup.retry_dead(QUEUE, asked)
        expected = [i for i in dict.fromkeys(asked) if self.jobs[i].state == "dead"]
        assert moved == expected
        for job_id in moved:
            self.jobs[job_id].attempts = self.jobs[job_id].losses = 0
            self.to_back_of_line(self.jobs[job_id])

    @rule()
    def retry_all_dead(self) -> None:
        dead = {j.id for j in self.in_state("dead")}
        moved = self.broker.cleanup.retry_dead(QUEUE, [], limit=500)
        # Oldest death first; deaths within one ms tie by id, which the model
        # cannot see, so it takes the order from the answer, checked as a set.
        assert sorted(moved) == sorted(dead) and len(moved) == len(dead)
        for job_id in moved:
            self.jobs[job_id].attempts = self.jobs[job_id].losses = 0
            self.to_back_of_line(self.jobs[job_id])

    # -- what must hold after every step ----------------------------------

    @invariant()
    def redis_matches_model(self) -> None:
        ids = sorted(self.jobs)
        pipe = inspector(self.app).pipeline(transaction=False)
        for key in (KEYS.pending, KEYS.scheduled, KEYS.running):
            pipe.zrange(key, 0, -1, withscores=True)
        pipe.zrange(KEYS.dead, 0, -1)
        pipe.get(KEYS.seq)
        pipe.keys(KEYS.prefix + "claim:*")
        pipe.zrange(search_index(QUEUE), 0, -1)
        for job_id in ids:
            pipe.hmget(KEYS.job(job_id), "state", "attempts", "seq", "max_attempts", "priority", "created_at", "task")
            pipe.pttl(KEYS.job(job_id))
        replies = pipe.execute()
        index = replies.pop(6)
        pending, scheduled, running = ({m.decode(): s for m, s in r} for r in replies[:3])
        dead = {m.decode() for m in replies[3]}
        assert int(replies[4] or 0) == self.seq
        # A claim keeps no list of its jobs (a lost reply finds them in running by token).
        assert replies[5] == []

        # No job lost, none duplicated, none in two sets: the sets are exactly the model's.
        line = self.line()
        assert list(pending) == [j.id for j in line], "pending order is not priority, then FIFO"
        assert set(scheduled) == {j.id for j in self.in_state("scheduled", "retrying")}
        assert set(running) == {j.id for j in self.in_state("running")}
        assert dead == {j.id for j in self.in_state("dead")}
        for job in line:
            assert pending[job.id] == (3 - job.priority) * BAND + job.seq
        for job in self.in_state("scheduled", "retrying"):
            assert scheduled[job.id] == job.due
        now = redis_ms(self.app)
        for job in self.in_state("running"):
            if job.lease_bound is None:
                assert running[job.id] > now + FAR_MS / 2
            else:
                assert running[job.id] <= job.lease_bound

        # The search index: t per job (no keys here), d while dead, c once cancelled; nothing else.
        entries = set()
        for job_id, fields in zip(ids, replies[6::2], strict=True):
            created, task = int(fields[5]), fields[6].decode()
            stamp = f"{created:013d}{len(job_id)}:{job_id}"
            entries.add(f"t{len(task)}:{task}{stamp}")
            state = self.jobs[job_id].state
            if state in ("dead", "cancelled"):
                entries.add(state[0] + stamp)
        assert {m.decode() for m in index} == entries

        for job_id, fields, ttl in zip(ids, replies[6::2], replies[7::2], strict=True):
            job = self.jobs[job_id]
            state, attempts, seq, max_attempts, priority = (None if f is None else f.decode() for f in fields[:5])
            # Absent: the default a new record leaves out (record.py).
            assert (state, int(attempts or 0)) == (job.state, job.attempts), job_id
            assert (int(max_attempts or DEFAULT_MAX_ATTEMPTS), int(priority or 1)) == (job.max_attempts, job.priority)
            # A finished record keeps no place in line (finish drops seq).
            assert (None if seq is None else int(seq)) == (job.seq if job.state in UNFINISHED else None)
            if job.state in UNFINISHED:
                assert ttl == -1, f"unfinished {job.state} job {job_id} expires"
            else:
                assert ttl > 0, f"finished {job.state} job {job_id} never expires"


# Passing takes well under a minute per backend; a failure then shrinks for up
# to a few minutes, and must be allowed to finish and print its steps.
@pytest.mark.slow  # about 25 s for both backends: kept out of the quick subset
@pytest.mark.timeout(600)
def test_queue_matches_model(broker_url: str) -> None:
    shared = None if broker_url == "memory://" else TaskForge("model", broker=broker_url)

    def fresh_app() -> TaskForge:
        if shared is None:  # memory:// is private to its app: a new one is a new, empty Redis
            app = TaskForge("model", broker="memory://")
        else:
            inspector(shared).flushdb()
            app = shared
        if "model.job" not in app.tasks:
            app.task(name="model.job", queue=QUEUE)(lambda *args: None)
        # The model promotes due jobs at every claim; a worker does so at a
        # bounded interval (tests/broker/test_lean_claims.py checks that bound).
        app.broker.claims.hints.promote_every_s = 0
        return app

    machine = type("QueueModel", (QueueMachine,), {"make_app": lambda self: fresh_app(), "examples": 0})
    run_state_machine_as_test(machine, settings=SETTINGS)
    assert machine.examples >= EXAMPLES
