"""Junk in any shared key stops no reader (issue 47: "One junk entry stops everything").

Every key of the keyspace table (junk.py reads it) meets every kind of damage,
one key at a time, against every reader (the library, the CLI, each dashboard
page and JSON API, the metrics, the KEDA endpoint) on memory:// (about 30 s of
CPU for the whole matrix); then, on real Redis, every key spoiled at once per
kind of damage, against every reader again. What each reader may do about
junk is decided in readers.py. Then the worker: real processes with all the
junk present, one running and one starting.
"""

from __future__ import annotations

import asyncio
import logging
import re
import signal
import socket
import time

import msgpack
import pytest
import redis

from taskforge import TaskForge
from taskforge.broker import junk as junk_layer
from taskforge.broker import keys
from taskforge.broker.keys import QueueKeys
from taskforge.broker.workers import live_workers
from taskforge.errors import CorruptPayload
from tests.worker.conftest import wait_for

from .baddata import report
from .junk import DAMAGE, QUEUE, Scene, Snapshot, build, keyspace, spoil
from .readers import READERS

HOST = socket.gethostname()


@pytest.fixture(scope="module")
def memory_scene() -> tuple[Scene, Snapshot]:
    scene = build("memory://")
    return scene, Snapshot(scene.app.broker.client)


def test_the_catalogue_covers_the_whole_keyspace_table() -> None:
    """A key added to the table is spoiled here too: each pattern gets a concrete key in the scene."""
    scene = build("memory://")
    concrete = {pattern: scene.concrete(pattern) for pattern, _ in keyspace()}
    assert len(set(concrete.values())) == len(concrete), "two patterns of the table became one key"


def test_the_healthy_scene_reads_everywhere(memory_scene: tuple[Scene, Snapshot]) -> None:
    scene, snapshot = memory_scene
    snapshot.restore()
    report([f"{name}: {why}" for name, read in READERS.items() if (why := read(scene, "-"))])


CHUNKS = 4  # of the table's rows: a test per damage and chunk stays well inside the suite's timeout


@pytest.mark.parametrize("chunk", range(CHUNKS))
@pytest.mark.parametrize("damage", DAMAGE)
def test_every_key_with_this_damage_stops_no_reader(
    memory_scene: tuple[Scene, Snapshot], damage: str, chunk: int
) -> None:
    scene, snapshot = memory_scene
    client = scene.app.broker.client
    problems = []
    for pattern, kind in keyspace()[chunk::CHUNKS]:
        snapshot.restore()
        key = scene.concrete(pattern)
        spoil(client, key, kind, damage)
        problems += [
            f"{pattern} ({damage}): {name} {why}" for name, read in READERS.items() if (why := read(scene, key))
        ]
    report(problems)


@pytest.mark.parametrize("damage", DAMAGE)
@pytest.mark.redis
def test_every_key_spoiled_at_once_stops_no_reader(
    redis_url: str, damage: str, caplog: pytest.LogCaptureFixture
) -> None:
    scene = build(redis_url)
    client = scene.app.broker.client
    spoiled = []
    for pattern, kind in keyspace():
        key = scene.concrete(pattern)
        spoil(client, key, kind, damage)
        spoiled.append(key)
    with caplog.at_level(logging.WARNING, logger="taskforge"):
        problems = [f"{name}: {why}" for name, read in READERS.items() if (why := read(scene, ""))]
        for read in READERS.values():  # the same again: no key is warned about twice
            read(scene, "")
    said = [r.getMessage() for r in caplog.records if "which taskforge never writes" in r.getMessage()]
    named = [line.split(" holds ", 1)[0] for line in said]
    problems += [f"warned {named.count(n)} times about {n}" for n in sorted(set(named)) if named.count(n) > 1]
    report(problems, f"every key spoiled ({damage}): ")


def test_a_junk_worker_entry_is_skipped_with_one_warning(broker_url: str, caplog: pytest.LogCaptureFixture) -> None:
    """Item 5's reading side: the listing every worker reads leaves junk entries out, saying so once per key."""
    app = TaskForge("junkapp", broker=broker_url)
    client = app.broker.client
    now = int(time.time() * 1000)
    tag = str(time.monotonic_ns())  # keys no earlier test of this process has warned about
    entries = {
        f"pid-{tag}": {"id": f"pid-{tag}", "pid": "abc", "queues": "[]"},
        f"json-{tag}": {"id": f"json-{tag}", "pid": "1", "queues": "{not json", "processes": "[[", "tasks": "{"},
        f"bytes-{tag}": {"id": b"\xff\xfe", "pid": b"\xff"},
    }
    for worker_id, fields in entries.items():
        client.hset(keys.worker_key(worker_id), mapping=fields)
        client.zadd(keys.WORKERS, {worker_id: now})
    client.zadd(keys.WORKERS, {b"\xff\xfe" + tag.encode(): now})
    with caplog.at_level(logging.WARNING, logger="taskforge"):
        for _ in range(3):
            listing = {w["id"]: w for w in live_workers(client)}
    assert listing[f"pid-{tag}"]["pid"] == 0 and listing[f"json-{tag}"]["queues"] == []
    assert f"bytes-{tag}" not in listing
    said = [r.getMessage() for r in caplog.records]
    for worker_id in entries:
        lines = [line for line in said if keys.worker_key(worker_id) in line]
        assert len(lines) == 1, (worker_id, said)
    assert junk_layer.said(keys.WORKERS)


def test_a_corrupt_stored_result_raises_corrupt_payload(broker_url: str) -> None:
    """Item 7: the value is lost, and result() says so (None is what a task may have returned)."""
    app = TaskForge("junkapp", broker=broker_url)

    @app.task(name="ok", queue=QUEUE)
    def ok() -> int:
        return 42

    from taskforge.inprocess import drain

    handle = ok.delay()
    drain(app)
    key = QueueKeys(QUEUE).job(handle.id)
    app.broker.client.hset(key, "result", msgpack.packb([1, 2]) + b"\xc1")
    with pytest.raises(CorruptPayload, match=re.escape(key) + ".*cannot be read"):
        handle.result(timeout=1)
    with pytest.raises(CorruptPayload, match=re.escape(key) + ".*cannot be read"):
        asyncio.run(handle.aresult(timeout=1))


# -- the worker: a running worker keeps running jobs with all the junk present, and a new one starts -------


def seed_all_junk(scene: Scene) -> None:
    """Every key of the scene with every kind of damage that keeps its type, plus junk worker entries."""
    client = scene.app.broker.client
    for pattern, kind in keyspace():
        key = scene.concrete(pattern)
        for damage in DAMAGE[1:]:
            spoil(client, key, kind, damage)
    now = int(client.time()[0]) * 1000
    # On this host, so a running worker's rescue reads them too (it reads only its own host's).
    pid, wrong, bad_json = (f"{HOST}:{name}" for name in ("pid-junk", "wrong-type", "json-junk"))
    client.zadd(keys.WORKERS, {f"{HOST}:\udcff".encode(errors="surrogateescape"): now, pid: now, wrong: now})
    client.zadd(keys.WORKERS, {bad_json: now})
    client.hset(keys.worker_key(pid), mapping={"id": pid, "pid": "abc", "host": HOST, "owner": "x", "boot": "b"})
    client.set(keys.worker_key(wrong), "not a hash")
    client.hset(keys.worker_key(bad_json), mapping={"id": bad_json, "processes": "[[", "queues": "{", "owner": "y"})
    client.sadd(keys.QUEUES, b"\xff\xfe-queue")


def ran_jobs(producer: TaskForge, side: redis.Redis, tag: str, n: int = 3) -> None:
    for i in range(n):
        producer.task_for("noop").with_options(queue="fuzz").delay(f"{tag}-{i}")
    wait_for(
        lambda: {f"{tag}-{i}".encode() for i in range(n)} <= set(side.lrange("fuzz:ran", 0, -1)),
        60,
        f"the jobs {tag}-* to run",
    )


def tracebacks_and_restarts(log: str) -> list[str]:
    """Each traceback in a worker's log, whole (its lines up to the exception's), and each child restart."""
    lines, found = log.splitlines(), []
    for i, line in enumerate(lines):
        if "starting a new one" in line:
            found.append(line[:200])
        elif "Traceback" in line:
            end = next((j for j in range(i + 1, len(lines)) if not lines[j].startswith(" ")), len(lines) - 1)
            found.append("\n".join(lines[i : end + 1]))
    return found


@pytest.mark.redis
@pytest.mark.slow
def test_workers_run_jobs_with_every_junk_present(start_worker, redis_url: str, side: redis.Redis) -> None:
    producer = TaskForge("producer", broker=redis_url)
    # The scene first: it runs its own jobs in its queue, which a worker of another app already
    # claiming there would take (and end dead, as tasks it does not know) before the scene saw them.
    scene = build(redis_url)
    running = start_worker("-c", "1", "-q", "fuzz", "-q", QUEUE)
    wait_for(lambda: "children on queues" in running.output(), 60, "the first worker to start")
    seed_all_junk(scene)
    time.sleep(10)  # past two looks at the worker listing (rescue.py, every 4 s): what killed workers
    assert running.proc.poll() is None, running.output()[-3000:]
    ran_jobs(producer, side, "first")
    starting = start_worker("-c", "1", "-q", "fuzz", "-q", QUEUE)
    wait_for(lambda: "children on queues" in starting.output(), 60, "a new worker to start with the junk present")
    running.signal(signal.SIGTERM)  # the next jobs can only be run by the new worker
    running.wait(60)
    ran_jobs(producer, side, "second")
    problems = [
        f"{name}: {chunk}"
        for name, worker in (("running", running), ("starting", starting))
        for chunk in tracebacks_and_restarts(worker.output())
    ]
    for name, worker in (("running", running), ("starting", starting)):
        for key in (keys.WORKERS, keys.worker_key(f"{HOST}:wrong-type")):
            said = sum(f"{key} holds" in line for line in worker.output().splitlines())
            if said != 1:
                problems.append(f"{name}: the log names {key} {said} times, not once")
    assert starting.proc.poll() is None and running.proc.returncode == 0, running.output()[-3000:]
    report(problems)
