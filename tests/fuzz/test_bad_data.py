"""Bad data in every key of a queue: the queue and the worker survive it, and every bad item ends visibly.

What counts as surviving is decided in baddata.py's docstring (job-level garbage)
and here (queue-level damage):

* a fixed key of the queue holding the wrong type (``pending`` a string, ``seq``
  a hash or a non-number...) means nothing can be claimed from that queue. A
  Broker call then returns normally or raises a ``TaskforgeError`` whose message
  names the broken key (never a bare ``redis.ResponseError: WRONGTYPE`` that
  names nothing); an enqueue that raises stores nothing; a ``--burst`` worker
  exits 0 within a bounded time, without a traceback, and its log names the key.

The same catalogue runs through the Broker in-process on ``memory://`` and real
Redis, then through a real ``taskforge worker --burst`` on real Redis.
"""

from __future__ import annotations

import random
import re
import signal
import time
import uuid
from collections.abc import Callable
from typing import Any

import msgpack
import pytest
import redis
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from taskforge import CorruptQueue, JobHandle, JobNotFound, JobState, TaskForge, TaskforgeError
from taskforge.broker.keys import QUEUES, QueueKeys
from taskforge.job import FailureKind
from taskforge.serialization import loads_call
from taskforge.status import status as queue_snapshot
from taskforge.worker.runner import run_claim
from tests.conftest import admin_client, inspector
from tests.worker.conftest import wait_for

from .baddata import (
    DROPPED,
    FINAL_STATES,
    FINISHED,
    QUEUE,
    TASK,
    Bad,
    catalogue,
    job_key,
    report,
    seed,
    sets_holding,
    verdict,
)

LEASE_MS = 60_000
SEED = 5


def fuzz_app(url: str, ran: list[str]) -> TaskForge:
    app = TaskForge("fuzz", broker=url)

    @app.task(name=TASK, queue=QUEUE)
    def noop(tag: object = None, *args: Any, **kwargs: Any) -> None:
        if isinstance(tag, str):
            ran.append(tag)

    return app


def drain(app: TaskForge, queue: str = QUEUE, rounds: int = 300) -> list[str]:
    """Do what a worker does, in-process, until nothing is ready; returns every exception a Broker call raised."""
    broker = app.broker
    raised: list[str] = []
    for _ in range(rounds):
        try:
            broker.claims.reclaim(queue)
        except Exception as exc:
            raised.append(f"reclaim raised {type(exc).__name__}: {str(exc)[:160]}")
        try:
            claims, wait = broker.claims.dequeue(queue, LEASE_MS)
        except Exception as exc:
            raised.append(f"dequeue raised {type(exc).__name__}: {str(exc)[:160]}")
            continue
        for claim in claims:
            run_claim(app, claim)
        if not claims and wait != 0:
            return raised
    raised.append(f"the queue was still busy after {rounds} dequeues")
    return raised


def inspect_everything(app: TaskForge, items: list[Bad], queue: str = QUEUE) -> list[str]:
    """peek, counts, status and every job's info/status: return normally or raise JobNotFound."""
    problems = []
    for name, call in (
        ("peek", lambda: app.broker.claims.peek([queue])),
        ("counts", lambda: app.broker.inspection.counts(queue)),
        ("status", lambda: queue_snapshot(app, [queue])),
    ):
        try:
            call()
        except Exception as exc:
            problems.append(f"{name}() raised {type(exc).__name__}: {str(exc)[:160]}")
    for item in items:
        if isinstance(item.id, bytes) or not item.id:
            continue  # a JobHandle takes a non-empty str id
        handle = JobHandle(app, item.id, queue)
        for name in ("info", "status"):
            try:
                getattr(handle, name)()
            except JobNotFound:
                pass
            except Exception as exc:
                problems.append(f"{item.key_id[:40]}: JobHandle.{name}() raised {type(exc).__name__}: {str(exc)[:160]}")
    return problems


def violations(client: redis.Redis, items: list[Bad], ran: list[str]) -> list[str]:
    out = []
    for item in items:
        why = verdict(client, item, ran)
        if why:
            out.append(f"{item.key_id[:40]} ({item.what}): {why}")
    return out


def test_every_bad_item_ends_visibly_and_no_broker_call_raises(broker_url: str) -> None:
    ran: list[str] = []
    app = fuzz_app(broker_url, ran)
    items = catalogue(random.Random(SEED))
    seed(inspector(app), items)
    raised = drain(app)
    problems = raised + inspect_everything(app, items) + violations(inspector(app), items, ran)
    report(problems)


def test_reclaim_counts_expired_claims_without_a_body(broker_url: str) -> None:
    app = fuzz_app(broker_url, [])
    ghosts = [Bad(f"ghost-{n}", "no body", DROPPED, where="running", body="none") for n in range(3)]
    seed(inspector(app), ghosts)
    back, buried, dropped = app.broker.claims.reclaim(QUEUE)
    assert (back, buried, dropped) == ([], [], 3)
    assert app.broker.inspection.counts(QUEUE)["running"] == 0


# -- property tests: any bytes, any msgpack value, any field value (memory://, fast) ----------------------

msgpack_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats()
    | st.text(max_size=8)
    | st.binary(max_size=8)
    | st.builds(msgpack.ExtType, st.integers(0, 127), st.binary(max_size=12)),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(inner.filter(lambda v: v is None or isinstance(v, (int, str, bytes))), inner, max_size=3)
    ),
    max_leaves=12,
)
payloads = (
    st.binary(max_size=300)
    | msgpack_values.map(msgpack.packb)
    | st.tuples(msgpack_values, msgpack_values).map(lambda pair: msgpack.packb(list(pair)))
)

FUZZ_SETTINGS = settings(
    max_examples=100, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)


def fresh_queue() -> str:
    return f"fz-{uuid.uuid4().hex[:12]}"


@FUZZ_SETTINGS
@given(data=payloads)
def test_any_payload_bytes_are_claimed_or_dead_lettered(data: bytes) -> None:
    app = fuzz_app("memory://", [])
    queue = fresh_queue()
    item = Bad("job", "fuzzed payload", FINISHED, fields={"payload": data})
    seed(inspector(app), [item], queue)
    claims, _ = app.broker.claims.dequeue(queue, LEASE_MS)
    fields = app.broker.jobs.read(queue, "job") or {}
    try:
        expected = loads_call(data)
    except TaskforgeError:
        assert claims == []
        assert fields.get(b"state") == b"dead" and fields.get(b"error", b"").startswith(b"CorruptPayload"), fields
        assert inspector(app).zscore(QueueKeys(queue).dead, "job") is not None
    else:
        assert [(c.args, c.kwargs) for c in claims] == [expected]


FIELD_NAMES = [
    "task",
    "payload",
    "priority",
    "max_attempts",
    "timeout",
    "attempts",
    "created_at",
    "started_at",
    "state",
    "seq",
    "inherit",
    "group",
    "unique",
    "progress",
    "token",
    "id",
    "failure",
]
junk = st.sampled_from(
    [
        "",
        "x",
        "-1",
        "0",
        "99",
        "1.5",
        "nan",
        "inf",
        "-inf",
        "1e400",
        "9" * 25,
        "-" + "9" * 25,
        "0x10",
        "taskforge:queues",
        "{",
        "running",
        "pending",
    ]
) | st.binary(max_size=12)


@FUZZ_SETTINGS
@example(name="state", value="running", where="pending")  # a running state no claim holds: once stranded
@given(name=st.sampled_from(FIELD_NAMES), value=junk, where=st.sampled_from(["pending", "scheduled", "running"]))
def test_any_field_value_leaves_the_job_finished_never_stranded(name: str, value: bytes | str, where: str) -> None:
    """The weakest promise: whatever one field holds, the job ends (run or dead-lettered), and nothing raises."""
    app = fuzz_app("memory://", [])
    queue = fresh_queue()
    item = Bad(f"job-{queue}", f"{name}={value!r} ({where})", FINISHED, where=where, fields={name: value})
    seed(inspector(app), [item], queue)
    raised = drain(app, queue, rounds=20)
    assert not raised, raised
    client = inspector(app)
    key = job_key(QueueKeys(queue), item.id)
    state = client.hget(key, "state")
    held = [
        s
        for s in ("pending", "scheduled", "running", "dead")
        if client.zscore(getattr(QueueKeys(queue), s), item.id) is not None
    ]
    assert state in (b"succeeded", b"dead"), f"{item.what}: state {state!r}, in {held or 'no set'}"
    assert held in ([], ["dead"]) and (state == b"dead") == (held == ["dead"]), (state, held)
    handle = JobHandle(app, item.id, queue)
    info = handle.info()
    handle.status()
    assert info.failure is None or isinstance(info.failure, FailureKind)
    if name == "failure" and where != "running" and state == b"succeeded":  # never failed: its junk is read as is
        assert info.failure is FailureKind.decode(value.decode(errors="replace") if isinstance(value, bytes) else value)


# -- queue-level damage: a fixed key of the wrong type ----------------------------------------------------


def _string(client: redis.Redis, key: str) -> None:
    client.set(key, "not what taskforge wrote")


def _list(client: redis.Redis, key: str) -> None:
    client.rpush(key, "not", "what", "taskforge", "wrote")


def _hash(client: redis.Redis, key: str) -> None:
    client.hset(key, "not", "what taskforge wrote")


def _value(text: str) -> Callable[[redis.Redis, str], None]:
    return lambda client, key: client.set(key, text)


Q = QueueKeys(QUEUE)
DAMAGE: dict[str, tuple[str, Callable[[redis.Redis, str], None]]] = {
    "pending-is-a-string": (Q.pending, _string),
    "scheduled-is-a-list": (Q.scheduled, _list),
    "running-is-a-hash": (Q.running, _hash),
    "dead-is-a-string": (Q.dead, _string),
    "seq-is-a-hash": (Q.seq, _hash),
    "seq-is-not-a-number": (Q.seq, _value("twelve")),
    "seq-at-its-maximum": (Q.seq, _value(str(2**63 - 1))),
    "wake-is-a-string": (Q.wake, _string),
    "limits-is-a-string": (Q.limits, _string),
    "queues-is-a-string": (QUEUES, _string),
}


def check(name: str, call: Callable[[], object], key: str, problems: list[str]) -> bool:
    """Run one Broker call: it may return, or raise a TaskforgeError that names ``key``. True if it raised."""
    try:
        call()
    except TaskforgeError as exc:
        if key not in str(exc):
            problems.append(f"{name}() raised {type(exc).__name__} without naming {key}: {str(exc)[:200]}")
        return True
    except Exception as exc:
        problems.append(f"{name}() raised {type(exc).__module__}.{type(exc).__name__}: {str(exc)[:200]}")
        return True
    return False


@pytest.mark.parametrize("damage", list(DAMAGE), ids=list(DAMAGE))
def test_a_damaged_queue_key_gives_a_clear_error_and_stores_nothing(broker_url: str, damage: str) -> None:
    ran: list[str] = []
    app = fuzz_app(broker_url, ran)
    client = inspector(app)
    before = app.send(TASK, "before-damage")  # stored while the queue was healthy
    key, spoil = DAMAGE[damage]
    client.delete(key)
    spoil(client, key)
    problems: list[str] = []
    # By name (the limits hash is asked), and from the task's definition (the
    # plain path: no pre-checks, only the order of its writes).
    for name, send in (
        ("enqueue", lambda: app.send(TASK, "after-damage")),
        ("delay", lambda: app.tasks[TASK].delay("after-damage")),
    ):
        jobs_before = set(client.scan_iter(match=Q.prefix + "job:*"))
        raised = check(name, send, key, problems)
        jobs_after = set(client.scan_iter(match=Q.prefix + "job:*"))
        if raised and jobs_after != jobs_before:
            problems.append(f"{name} raised, yet stored {sorted(jobs_after - jobs_before)}")
    for name, call in (
        ("dequeue", lambda: [run_claim(app, c) for c in app.broker.claims.dequeue(QUEUE, LEASE_MS)[0]]),
        ("reclaim", lambda: app.broker.claims.reclaim(QUEUE)),
        ("peek", lambda: app.broker.claims.peek([QUEUE])),
        ("counts", lambda: app.broker.inspection.counts(QUEUE)),
        ("status", lambda: queue_snapshot(app)),
        ("info", before.info),
        ("retry_dead", lambda: app.broker.cleanup.retry_dead(QUEUE)),
    ):
        check(name, call, key, problems)
    if key != Q.pending:  # else the damage itself dropped the job's place in line
        state = client.hget(Q.job(before.id), "state") or b""
        held = sets_holding(client, before.id)
        if state not in FINAL_STATES and held != [{"retrying": "scheduled"}.get(state.decode(), state.decode())]:
            problems.append(f"the job stored before the damage is {state!r} but held by {held}: half-moved")
    report(problems, f"with {key} damaged ({damage}): ")


def test_a_reclaim_facing_damaged_limits_moves_nothing_until_mended(broker_url: str) -> None:
    """The limits hash is read half-way through a limited job's reclaim: it must be checked before any write."""
    app = TaskForge("fuzz", broker=broker_url)

    @app.task(name="limited", queue=QUEUE, concurrency=1)
    def limited() -> None: ...

    handle = limited.delay()
    [claim] = app.broker.claims.dequeue(QUEUE, 50)[0]
    time.sleep(0.1)  # the lease expires: its worker is gone
    client = inspector(app)
    _string(client, Q.limits)
    with pytest.raises(CorruptQueue, match=re.escape(Q.limits)):
        app.broker.claims.reclaim(QUEUE)
    assert client.zscore(Q.running, handle.id) is not None and handle.status() is JobState.RUNNING
    client.delete(Q.limits)  # mended: taskforge recreates it
    assert app.broker.claims.reclaim(QUEUE) == ([handle.id], [], 0) and handle.status() is JobState.PENDING


def test_a_waiter_whose_done_list_is_damaged_gets_an_answer(broker_url: str) -> None:
    ran: list[str] = []
    app = fuzz_app(broker_url, ran)
    handle = app.send(TASK, "waited-on")
    with pytest.raises(TimeoutError):
        handle.result(timeout=0.01)  # marks the job as waited on
    key = Q.done(handle.id)
    _hash(inspector(app), key)
    problems = drain(app)
    check("result", lambda: handle.result(timeout=2), key, problems)
    state = inspector(app).hget(Q.job(handle.id), "state")
    assert state in (b"succeeded", b"dead") and ran == ["waited-on"], (state, ran)
    report(problems)


# -- the same through real worker processes ---------------------------------------------------------------

WORKER_EXIT = 90.0
WORKER_BOUND = 20.0  # a --burst worker with one child and one job: seconds, even on a loaded machine
DROP_LOG = re.compile(r"dropped (\d+)")


def crash_lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if "Traceback" in line or "starting a new one" in line]


@pytest.mark.redis
@pytest.mark.slow
def test_burst_worker_survives_the_whole_catalogue(start_worker, redis_url: str, side: redis.Redis) -> None:
    items = catalogue(random.Random(SEED))
    client = admin_client(redis_url)
    seed(client, items)
    worker = start_worker("-c", "1", "--burst", "-q", QUEUE)
    code = worker.wait(WORKER_EXIT)
    output = worker.output()
    ran = [tag.decode(errors="replace") for tag in side.lrange("fuzz:ran", 0, -1)]
    problems = [f"worker: {line[:200]}" for line in crash_lines(output)]
    if code != 0:
        problems.append(f"worker exited with {code}")
    dropped = sum(int(n) for n in DROP_LOG.findall(output))
    ghosts = sum(item.expect == DROPPED for item in items)
    if dropped < ghosts:
        problems.append(
            f"the worker's log reports {dropped} dropped ids; {ghosts} ids without a job hash were "
            "dropped (every drop must be counted)"
        )
    problems += violations(client, items, ran)
    report(problems, tail="\n--- log tail:\n" + output[-3000:])


WORKER_DAMAGE = [d for d in DAMAGE if not DAMAGE[d][0].startswith(QUEUES)]


@pytest.mark.redis
@pytest.mark.slow
def test_workers_facing_damaged_keys_neither_crash_nor_hang(start_worker, redis_url: str) -> None:
    """One burst worker per damaged queue, all at once; plus a long-running worker on a damaged wake list."""
    client = admin_client(redis_url)
    producer = TaskForge("producer", broker=redis_url)
    workers = {}
    for damage in [*WORKER_DAMAGE, "wake-is-a-string:long-running"]:
        queue = f"dmg-{damage.split(':')[0]}-{uuid.uuid4().hex[:6]}"
        producer.task_for(TASK).with_options(queue=queue).delay("healthy")
        key_name, spoil = DAMAGE[damage.split(":")[0]]
        key = key_name.replace(Q.prefix, QueueKeys(queue).prefix)
        client.delete(key)
        spoil(client, key)
        burst = ["--burst"] if not damage.endswith("long-running") else []
        workers[damage] = (key, start_worker("-c", "1", "-q", queue, "--grace", "2", *burst))
    long_running = workers["wake-is-a-string:long-running"][1]
    wait_for(lambda: "children on queues" in long_running.output(), WORKER_BOUND, "the long-running worker to start")
    time.sleep(4)  # long enough for a child that crashes on the idle wait to crash, twice
    long_running.signal(signal.SIGTERM)
    problems = []
    deadline = time.monotonic() + WORKER_BOUND
    for damage, (key, worker) in workers.items():
        try:
            code = wait_for(
                lambda w=worker: w.proc.poll() is not None and (w.proc.returncode,),
                max(0.1, deadline - time.monotonic()),
                f"the worker facing {damage} to exit",
            )[0]
        except AssertionError:
            problems.append(
                f"{damage}: the worker did not exit within {WORKER_BOUND:g} s (a --burst worker must not hang)"
            )
            continue
        output = worker.output()
        if code != 0:
            problems.append(f"{damage}: exit code {code}")
        problems += [f"{damage}: {line[:160]}" for line in crash_lines(output)]
        wrongtype = [line for line in output.splitlines() if "wrong kind of value" in line or "WRONGTYPE" in line]
        if any(key not in line for line in wrongtype):
            problems.append(f"{damage}: the log says WRONGTYPE without naming {key}: {wrongtype[0][:200]}")
    report(problems)
