"""Every key every Lua script touches carries the hash tag of the queue it was called for.

That is what lets each script run in one slot of a Redis Cluster. The test
watches a real Redis with MONITOR while a workload runs every script, takes
each command a script ran (MONITOR shows them as coming from ``lua``), asks
Redis itself which of its arguments are keys (``COMMAND GETKEYS``), and
checks each key's hash tag against the queue of the ``EVALSHA`` that ran it.
A script that built a key some other way, without the tag, fails here.
"""

from __future__ import annotations

import hashlib
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import redis

from taskforge import TaskForge, chain, group, status
from taskforge.broker import batches, workflow_pieces
from taskforge.broker.keys import QueueKeys
from taskforge.broker.queue import NewJob
from taskforge.broker.scripts import SCRIPT_NAMES, script_source
from taskforge.serialization import dumps_call, dumps_result
from tests.conftest import admin_client

END = "taskforge-single-slot-end"
PROBE = "taskforge-single-slot-probe"
PROBE_SCRIPT = "return redis.call('EXISTS', KEYS[1])"
_LINE = re.compile(rb"^\d+\.\d+ \[(\d+) ([^\]]+)\] (.*)$", re.S)
_ARG = re.compile(rb'"((?:[^"\\]|\\.)*)"', re.S)
_ESCAPES = {b"n": b"\n", b"r": b"\r", b"t": b"\t", b"a": b"\a", b"b": b"\b", b'"': b'"', b"\\": b"\\"}


def unescape(text: bytes) -> bytes:
    """An argument as MONITOR quotes it (sdscatrepr) back to its bytes."""
    out, i = bytearray(), 0
    while i < len(text):
        if text[i : i + 1] == b"\\":
            if text[i + 1 : i + 2] == b"x":
                out.append(int(text[i + 2 : i + 4], 16))
                i += 4
                continue
            out += _ESCAPES[text[i + 1 : i + 2]]
            i += 2
        else:
            out.append(text[i])
            i += 1
    return bytes(out)


def parse(line: bytes) -> tuple[int, str, list[bytes]]:
    """(database, who sent it: 'lua' or an address, [command, args...])."""
    match = _LINE.match(line)
    assert match, f"unexpected MONITOR line {line[:200]!r}"
    return int(match.group(1)), match.group(2).decode(), [unescape(arg) for arg in _ARG.findall(match.group(3))]


@contextmanager
def monitored(url: str) -> Iterator[list[tuple[str, list[bytes]]]]:
    """Everything the server runs on the database of ``url`` while the block runs, parsed.

    MONITOR shows every database: the other tests running beside this one use others.
    """
    seen: list[tuple[str, list[bytes]]] = []
    db = admin_client(url).connection_pool.connection_kwargs.get("db", 0)
    end = f"{END}-{uuid.uuid4().hex}"
    monitor = admin_client(url).monitor()
    monitor.__enter__()
    done = threading.Event()

    def read() -> None:
        while True:
            line = monitor.connection.read_response()
            line = line if isinstance(line, bytes) else str(line).encode()
            on, who, argv = parse(line)
            if on != db:
                continue
            if end.encode() in line:
                done.set()
                return
            seen.append((who, argv))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    client = admin_client(url)
    for name in SCRIPT_NAMES:  # no NOSCRIPT round in the log
        client.script_load(script_source(name))
    client.register_script(PROBE_SCRIPT)(keys=[PROBE])
    try:
        yield seen
    finally:
        client.echo(end)
        assert done.wait(30), "MONITOR never showed the end marker"
        monitor.__exit__(None, None, None)


def tag(key: bytes) -> bytes | None:
    """The part of ``key`` Redis Cluster hashes, when it has a hash tag (None when not)."""
    start = key.find(b"{")
    end = key.find(b"}", start + 1)
    return key[start + 1 : end] if start >= 0 and end > start + 1 else None


def every_script(app: TaskForge, queue: str) -> None:
    """Run each script at least once, through the paths that touch the most keys."""
    b = app.broker

    @app.task(queue=queue)
    def plain(n: int) -> int:
        return n

    @app.task(queue=queue, unique=True)
    def single(n: int) -> int:
        return n

    app.limit(f"shared-{queue}", concurrency=5, rate="100/s")  # a named limit's keys are the queue's too

    @app.task(queue=queue, rate_limit="100/s", concurrency=2, limits=[f"shared-{queue}"])
    def limited(n: int) -> int:
        return n

    @app.task(queue=queue, key="account", key_concurrency=1, key_rate_limit="100/s", limits=[f"shared-{queue}"])
    def keyed(account: str) -> str:
        return account

    refusing = {"on": True}

    @app.task(queue=queue, max_attempts=1)
    def refuses(n: int) -> int:
        if refusing["on"]:
            raise ValueError("refused")
        return n

    plain.delay(1)
    plain.delay_many([(5,), (6,)])  # for settle
    plain.apply_in(3600, 2)
    single.delay(1)
    single.delay(1)
    limited.delay(1)
    b.jobs.enqueue(
        queue,
        [
            NewJob(
                id="tick-1",
                task="tick",
                payload=dumps_call((), {}),
                priority=1,
                max_attempts=1,
                inherit=True,
                lock_ttl_ms=60_000,
                tick_ms=1000,
            )
        ],
    )
    b.jobs.await_state(queue, "tick-1")
    b.claims.peek([queue, "another-queue"])
    b.flow.pause(queue)
    b.flow.resume(queue)
    claims = []
    for _ in range(5):
        claims += b.claims.dequeue(queue, 60_000, count=5)[0]
    first, second, third, fourth, fifth, sixth, *_ = claims
    b.claims.settle(queue, [(fifth.id, fifth.token, dumps_result(5)), (sixth.id, sixth.token, dumps_result(6))])
    b.claims.adopt(queue, first.id, first.token, 3, 10.0)
    b.claims.progress(queue, first.id, first.token, 0.5, "halfway")
    b.steps.store(queue, first.id, first.token, "fetched", dumps_result("profile"))
    b.steps.append(queue, first.id, first.token, dumps_result("a token"), 1)  # a stream item
    b.claims.extend(queue, 60_000, [(c.id, c.token) for c in claims])
    b.claims.succeed_and_claim(queue, first.id, first.token, dumps_result(1), 60_000, "next-token")
    b.claims.succeed(queue, second.id, second.token, dumps_result(2))
    b.claims.fail(queue, third.id, third.token, "boom", "tb", None)  # dead
    b.jobs.abort(queue, fourth.id)
    b.claims.extend(queue, 60_000, [(fourth.id, fourth.token)])
    b.claims.abandon(queue, fourth.id, fourth.token)
    plain.delay(3)
    again = b.claims.dequeue(queue, 1, count=1)[0]
    time.sleep(0.01)
    b.claims.reclaim(queue)  # its 1 ms lease is over
    requeued = b.claims.dequeue(queue, 60_000, count=1)[0]
    for claim in requeued:
        b.claims.requeue(queue, claim.id, claim.token)
    passed = b.claims.dequeue(queue, 60_000, token="owner0000001.passed")[0]
    for claim in passed:
        b.claims.pass_job(queue, claim.id, claim.token, 500, 5_000)  # a task this worker does not know
    plain.delay(4)
    for claim in b.claims.dequeue(queue, 60_000, count=1)[0]:
        b.steps.sleep(queue, claim.id, claim.token, 1, 0, 1_000)  # a durable sleep
    b.claims.fast_forward(queue, 10)
    b.claims.dequeue(queue, 60_000, token="owner0000002.lost")
    b.claims.expire_owner(queue, "owner0000002.")  # a worker proved dead
    b.claims.reclaim(queue)
    b.cleanup.sweep(queue, 1.0)  # what a worker runs after each reclaim
    b.claims.fail(queue, *(lambda c: (c.id, c.token))(b.claims.dequeue(queue, 60_000)[0][0]), "flaky", "tb", 30.0)
    b.claims.fast_forward(queue, 3600)
    b.cleanup.retry_dead(queue)
    cancelled = plain.delay(4).id
    b.jobs.cancel(queue, cancelled)
    b.cleanup.delete(queue, [cancelled])  # a bulk delete
    b.jobs.abort(queue, plain.delay(5).id)
    b.cleanup.purge(queue, "pending")
    b.cleanup.purge(queue, "scheduled")
    b.cleanup.purge(queue, "dead")
    # Keyed jobs: lanes and turns, a key held at its cap and let go, a head cancelled, lanes purged.
    lane_a = [keyed.delay("a") for _ in range(3)]
    keyed.with_options(priority="high").delay("b")
    b.claims.peek([queue])
    first_keyed = b.claims.dequeue(queue, 60_000, count=5)[0]  # one job per key
    assert b.claims.dequeue(queue, 60_000, count=5)[0] == []  # "a" at its cap: held
    b.claims.settle(queue, [(c.id, c.token, dumps_result(c.args[0])) for c in first_keyed])
    assert lane_a[1].cancel()  # a lane's head: its next job takes its turn
    keyed.delay("d")
    keyed.delay("d")
    b.cleanup.purge(queue, "pending")
    assert again, "the reclaim path needs a claim whose lease ran out"
    # The workflow scripts, in the workflow's own slot; cancel_steps in the queue's.
    flow = chain(plain.s(1), plain.s(), on_failure=plain.si(0)).delay()
    assert b.ledger.workflow_flight(flow.id).state == "running"  # what the reconciler asks of a launch
    # depends_on: held (defer), listed by its parent (depend), told of its end by the drain (dep_report).
    waiting = plain.apply_async((8,), depends_on=plain.delay(7))
    app.drain()
    assert waiting.result(timeout=5) == 8
    assert flow.result(timeout=5) == 1
    # A big delay_many and a big group, in slices and pieces (knobs set small): their keys too.
    sizes = (batches.SLICE_JOBS, workflow_pieces.PIECE_UNITS)
    batches.SLICE_JOBS, workflow_pieces.PIECE_UNITS = 2, 4
    try:
        plain.delay_many([(i,) for i in range(5)])
        group(plain.s(i) for i in range(5)).delay()
    finally:
        batches.SLICE_JOBS, workflow_pieces.PIECE_UNITS = sizes
    app.drain()
    assert chain(plain.s(1), plain.s()).delay().cancel()
    dead = chain(refuses.s(1), plain.s()).delay()  # workflow_resume, then replan_steps in the queue's slot
    app.drain()
    refusing["on"] = False
    assert dead.retry()
    app.drain()
    assert dead.result(timeout=5) == 1
    # The operators' view of every queue (queue_probe), and a queue emptied, then forgotten (forget).
    status.status(app, [queue])
    plain.with_options(queue=f"{queue}-gone").delay(1)
    b.cleanup.purge(f"{queue}-gone", "pending")
    b.cleanup.forget(f"{queue}-gone")


def ran_scripts(seen: list[tuple[str, list[bytes]]]) -> list[tuple[str, bytes, list[list[bytes]]]]:
    """(script name, KEYS[1], the commands it ran) per EVALSHA, in order.

    Whether MONITOR shows a script's own commands after its EVALSHA (Redis 7.0)
    or before it (once fed after execution) is read from the probe script
    ``monitored`` runs first.
    """
    names = {hashlib.sha1(script_source(n).encode()).hexdigest().encode(): n for n in SCRIPT_NAMES}
    names[hashlib.sha1(PROBE_SCRIPT.encode()).hexdigest().encode()] = "probe"
    evalsha_at = next(i for i, (w, a) in enumerate(seen) if a[:1] == [b"EVALSHA"] and PROBE.encode() in a)
    lua_at = next(i for i, (w, a) in enumerate(seen) if w == "lua" and PROBE.encode() in a)
    calls = [(i, a) for i, (w, a) in enumerate(seen) if w != "lua" and a and a[0].lower() == b"evalsha"]
    lua = [(i, a) for i, (w, a) in enumerate(seen) if w == "lua"]
    runs = []
    for n, (at, argv) in enumerate(calls):
        if evalsha_at < lua_at:  # its commands follow it, up to the next EVALSHA
            end = calls[n + 1][0] if n + 1 < len(calls) else len(seen)
            inner = [a for i, a in lua if at < i < end]
        else:
            start = calls[n - 1][0] if n else -1
            inner = [a for i, a in lua if start < i < at]
        runs.append((names.get(argv[1], argv[1].decode()), argv[3], inner))
    return runs


def keys_of(client: redis.Redis) -> Callable[[list[bytes]], list[bytes]]:
    def keys(argv: list[bytes]) -> list[bytes]:
        try:
            return [k if isinstance(k, bytes) else k.encode() for k in client.command_getkeys(*argv)]
        except redis.ResponseError:  # TIME and the like: only a command without key arguments may refuse
            (info,) = client.execute_command("COMMAND", "INFO", argv[0]).values()
            # key_specifications came with Redis 7.0; 6.2 gives only the first key's position (0: none)
            assert not info.get("key_specifications", info.get("first_key_pos")), (
                f"GETKEYS refused {argv!r}, a command that takes keys"
            )
            return []

    return keys


def untagged(client: redis.Redis, runs: list[tuple[str, bytes, list[list[bytes]]]]) -> tuple[list[str], int]:
    """Every key a script touched outside its queue's hash tag, described; and how many keys were checked."""
    keys = keys_of(client)
    found, checked = [], 0
    for name, first_key, commands in runs:
        if name == "probe":
            continue
        for argv in commands:
            for key in keys(argv):
                checked += 1
                if tag(key) != tag(first_key):
                    found.append(f"{name} ran {argv[0].decode()} on {key!r}, called for {first_key!r}")
    return found, checked


def test_every_key_every_script_touches_carries_the_queue_hash_tag(redis_url: str) -> None:
    app = TaskForge("slots", broker=redis_url)
    with monitored(redis_url) as seen:
        every_script(app, "slot-check")
    runs = ran_scripts(seen)
    assert {name for name, _, _ in runs} - set(SCRIPT_NAMES) == {"probe"}
    assert {name for name, _, _ in runs} >= set(SCRIPT_NAMES), "the workload must run every script"
    found, checked = untagged(admin_client(redis_url), runs)
    assert found == []
    assert checked > 100


def test_the_check_catches_a_key_without_the_tag(redis_url: str) -> None:
    client = admin_client(redis_url)
    stray = client.register_script("redis.call('HSET', KEYS[1], 'a', 1) redis.call('GET', ARGV[1]) return 1")
    with monitored(redis_url) as seen:
        stray(keys=[QueueKeys("q").pending], args=["taskforge:q:x"])
    found, checked = untagged(client, ran_scripts(seen))
    assert checked == 2
    assert len(found) == 1 and "GET on b'taskforge:q:x'" in found[0]
