"""A catalogue of bad data, written straight into a queue's keys, and what must become of each item.

Acceptable behaviour, decided here once so every test can hold the code to it:

* Job-level garbage (a payload that is not ``[args, kwargs]``, a junk field, an id
  with no body, a body no set refers to, a job key of the wrong type): the queue
  never raises. ``Broker.dequeue``/``reclaim``/``peek``/``counts`` return normally,
  ``JobHandle.info``/``status`` return or raise ``JobNotFound``, a worker never
  crashes, and every bad job *ends*: in the dead-letter set with an error naming
  the damage (``DEAD``), or run (``RUNS``) when the damage is in a field the queue
  has a documented default for (priority -> normal, max_attempts -> 1, timeout ->
  none). ``FINISHED`` accepts either. An id with no body is dropped from its set
  (``DROPPED``) and the drop is counted (``reclaim``'s return, the worker's log).
  A body that no set refers to cannot be found without a SCAN and is left alone
  (``UNTOUCHED``); so is a finished job whose id is left in a set by mistake.
  Never acceptable: a job whose state says unfinished while no set holds it
  ("stranded": no worker will ever run it, ``result()`` waits forever).
* Queue-level damage (a fixed key such as ``pending`` of the wrong type): see
  test_bad_data.py; the queue cannot serve, and says which key is broken.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, field

import msgpack
import pytest
import redis

from taskforge.broker.keys import QueueKeys
from taskforge.broker.queue import PRIORITY_BAND
from taskforge.errors import CorruptPayload
from taskforge.serialization import dumps_call, loads_call

QUEUE = "fuzz"
TASK = "noop"
MIB = 1024 * 1024

DEAD, RUNS, FINISHED, DROPPED, UNTOUCHED = "dead", "runs", "finished", "dropped", "untouched"
FINAL_STATES = (b"succeeded", b"dead", b"cancelled")


def report(problems: list[str], header: str = "", tail: str = "") -> None:
    """Fail with every problem listed once (an assert would print them twice, as its repr)."""
    if problems:
        pytest.fail(f"{header}{len(problems)} problem(s):\n" + "\n".join(problems) + tail, pytrace=False)


def corrupt(data: bytes) -> bool:
    try:
        loads_call(data)
    except CorruptPayload:
        return True
    return False


def random_garbage(rng: random.Random, size: int) -> bytes:
    """Random bytes that are not a valid job payload (checked, not hoped)."""
    while True:
        data = rng.randbytes(size)
        if corrupt(data):
            return data


def ext_bomb(depth: int) -> bytes:
    """A tuple in a tuple in a tuple...: ext data nested ``depth`` deep, a C-stack killer if decoded naively."""
    data = msgpack.packb([])
    for _ in range(depth):
        data = msgpack.packb([msgpack.ExtType(1, data)])
    return msgpack.packb([[msgpack.ExtType(1, data)], {}])


@dataclass(frozen=True)
class Bad:
    """One bad item. ``fields`` override a well-formed job hash; a None value deletes the field."""

    id: str | bytes
    what: str
    expect: str
    where: str = "pending"  # pending | scheduled | running | dead | nowhere
    fields: Mapping[str, bytes | str | int | None] = field(default_factory=dict)
    body: str = "hash"  # hash | none | string | list | set | zset
    reason: str = ""  # for DEAD: a substring the recorded error must contain

    @property
    def key_id(self) -> str:
        return self.id if isinstance(self.id, str) else repr(self.id)


def payload(tag: str) -> bytes:
    return dumps_call((tag,), {})


def catalogue(rng: random.Random) -> list[Bad]:
    """Every bad item; ids say what each one is, so a failure message reads on its own."""
    items = [
        Bad(
            f"payload-random-{n}",
            f"{n} random bytes as payload",
            DEAD,
            fields={"payload": random_garbage(rng, n)},
            reason="CorruptPayload",
        )
        for n in (1, 2, 7, 64, 4096)
    ]
    shapes: dict[str, bytes] = {
        "map": msgpack.packb({"args": [], "kwargs": {}}),
        "int": msgpack.packb(42),
        "str": msgpack.packb("[[], {}]"),
        "nil": msgpack.packb(None),
        "bin": msgpack.packb(b"\x92\x90\x80"),
        "list-0": msgpack.packb([]),
        "list-1": msgpack.packb([[]]),
        "list-3": msgpack.packb([[], {}, None]),
        "swapped": msgpack.packb([{}, []]),
        "args-map": msgpack.packb([{}, {}]),
        "kwargs-list": msgpack.packb([[], []]),
        "int-kwarg-name": msgpack.packb([[], {1: 2}]),
        "bin-kwarg-name": msgpack.packb([[], {b"to": 1}]),
        "unknown-ext": msgpack.packb([[msgpack.ExtType(42, b"x")], {}]),
        "timestamp-ext": msgpack.packb([[msgpack.Timestamp(1, 0)], {}], datetime=False),
        "bad-datetime-ext": msgpack.packb([[msgpack.ExtType(4, msgpack.packb(["x"] * 9))], {}]),
        "month-13-datetime": msgpack.packb(
            [[msgpack.ExtType(4, msgpack.packb([2024, 13, 1, 0, 0, 0, 0, 0, None]))], {}]
        ),
        "bad-decimal-ext": msgpack.packb([[msgpack.ExtType(9, b"12abc")], {}]),
        "short-uuid-ext": msgpack.packb([[msgpack.ExtType(8, b"\x01\x02")], {}]),
        "truncated": payload("x")[:-1],
        "trailing-byte": payload("x") + b"\xc0",
        "invalid-utf8-str": b"\x92\x91\xa2\xff\xfe\x80",
        "empty": b"",
        "deep-arrays": b"\x92" + b"\x91" * 100_000 + b"\xc0" + b"\x80",
        "ext-bomb": ext_bomb(5_000),
        "huge-garbage": b"\xc1" + rng.randbytes(17 * MIB),
    }
    items += [
        Bad(f"payload-{name}", f"payload {name}", DEAD, fields={"payload": data}, reason="CorruptPayload")
        for name, data in shapes.items()
    ]
    items += [
        Bad("payload-missing", "no payload field", DEAD, fields={"payload": None}, reason="CorruptPayload"),
        # Over the producer's 16 MiB limit, but a well-formed job: the worker runs what is stored.
        Bad(
            "payload-huge-valid",
            "a 17 MiB argument",
            FINISHED,
            fields={"payload": dumps_call(("payload-huge-valid", "a" * (17 * MIB)), {})},
        ),
        Bad("task-missing", "no task field", DEAD, fields={"task": None}, reason="task"),
        Bad("task-empty", "task ''", DEAD, fields={"task": ""}, reason="task"),
        Bad("task-invalid-utf8", "task name not UTF-8", DEAD, fields={"task": b"\xff\xfe"}, reason="UnknownTask"),
        Bad("task-huge", "a 1 MiB task name", DEAD, fields={"task": "t" * MIB}, reason="UnknownTask"),
        Bad("id-field-mismatch", "the id field names another job", FINISHED, fields={"id": "someone-else"}),
        Bad("attempts-huge", "attempts 99 > max_attempts", RUNS, fields={"attempts": "99"}),
        Bad("created-at-huge", "created_at far beyond year 9999", RUNS, fields={"created_at": "9" * 20}),
        Bad("scheduled-at-negative", "scheduled_at far before year 1", RUNS, fields={"scheduled_at": "-" + "9" * 20}),
        Bad("progress-junk", "progress 'abc'", RUNS, fields={"progress": "abc"}),
        Bad("inherit-junk", "inherit 'yes please'", RUNS, fields={"inherit": "yes please"}),
        Bad("failure-junk", "failure 'on fire'", RUNS, fields={"failure": "on fire"}),
        Bad("failure-invalid-utf8", "failure not UTF-8", RUNS, fields={"failure": b"\xff\xfe"}),
    ]
    for value in ("x", "", "99", "-1", "inf", "nan", "1e400"):
        for where in ("pending", "scheduled"):
            items.append(
                Bad(
                    f"priority-{value or 'empty'}-{where}",
                    f"priority {value!r} ({where})",
                    RUNS,
                    where=where,
                    fields={"priority": value},
                )
            )
    # expires: junk (or a time beyond reach) means no expiry, a past time ends the job unrun;
    # either way it ends. keep_ms junk falls back to a day's retention.
    for value, expect in (("abc", RUNS), ("", RUNS), ("nan", RUNS), ("inf", RUNS), ("1e400", RUNS),
                          ("9" * 30, RUNS), ("-5", FINISHED), ("-1e400", FINISHED), ("0x10", FINISHED)):  # fmt: skip
        for where in ("pending", "scheduled"):
            items.append(
                Bad(
                    f"expires-{value[:6] or 'empty'}-{where}",
                    f"expires {value!r} ({where})",
                    expect,
                    where=where,
                    fields={"expires": value},
                )  # fmt: skip
            )
    for value in ("abc", "-1", "nan", b"\xff\xfe"):
        items.append(
            Bad(
                f"keep-ms-{value!r}", f"keep_ms {value!r}, expired", FINISHED, fields={"expires": "1", "keep_ms": value}
            )
        )
    # headers: metadata, never what a task computes with; junk costs the job its headers, not its run.
    for value in ("{not json", '{"h": 1}', "[1, 2]", b"\xff\xfe", '"text"', "", "{}", "x" * MIB):
        items.append(
            Bad(f"headers-{str(value)[:8]!r}", f"headers {str(value)[:20]!r}", RUNS, fields={"headers": value})
        )
    for value in ("abc", "0", "-3", ""):
        items.append(
            Bad(f"max-attempts-{value or 'empty'}", f"max_attempts {value!r}", RUNS, fields={"max_attempts": value})
        )
    for value in ("abc", "-5", "1e400"):  # one attempt: a worker may kill a job with a negative timeout at once
        items.append(
            Bad(f"timeout-{value}", f"timeout {value!r}", FINISHED, fields={"timeout": value, "max_attempts": 1})
        )
    for value in ("abc", "", "1.5", "9" * 30):
        for where in ("pending", "running"):
            items.append(
                Bad(
                    f"attempts-{value[:5] or 'empty'}-{where}",
                    f"attempts {value!r} ({where})",
                    DEAD,
                    where=where,
                    fields={"attempts": value},
                    reason="attempts",
                )
            )
    for value in ("bogus", "", None):
        items.append(
            Bad(
                f"state-{value or repr(value)}",
                f"state {value!r} in pending",
                DEAD,
                fields={"state": value},
                reason="state",
            )
        )
    items += [
        Bad("seq-junk-running", "seq 'abc', lease expired", FINISHED, where="running", fields={"seq": "abc"}),
        Bad("seq-nan-running", "seq 'nan', lease expired", FINISHED, where="running", fields={"seq": "nan"}),
        Bad("group-unknown", "group names no limited task", FINISHED, where="scheduled", fields={"group": "nobody"}),
        Bad("unique-wrong-type", "unique lock key is a set", FINISHED, fields={"unique": "taskforge:queues"}),
        Bad("state-succeeded-in-pending", "a finished job left in pending", UNTOUCHED, fields={"state": "succeeded"}),
        Bad(b"id-\xff\xfe-pending", "an id that is not UTF-8", FINISHED),
        Bad(b"id-\xff\xfe-running", "an id that is not UTF-8, lease expired", FINISHED, where="running"),
        # No body.
        Bad("ghost-pending", "id in pending, no job hash", DROPPED, body="none"),
        Bad("ghost-scheduled", "id in scheduled (due), no job hash", DROPPED, where="scheduled", body="none"),
        Bad("ghost-running", "id in running (expired), no job hash", DROPPED, where="running", body="none"),
        Bad("", "empty id in pending, no job hash", DROPPED, body="none"),
        Bad("g" * 100_000, "100 kB id in pending, no job hash", DROPPED, body="none"),
        Bad(b"ghost-\xff", "non-UTF-8 id in pending, no job hash", DROPPED, body="none"),
        Bad("body-string", "job key is a string", DROPPED, body="string"),
        Bad("body-list", "job key is a list", DROPPED, body="list"),
        Bad("body-set-running", "job key is a set, lease expired", DROPPED, where="running", body="set"),
        Bad("body-zset-scheduled", "job key is a zset, due", DROPPED, where="scheduled", body="zset"),
        # No set refers to these.
        Bad("orphan-pending", "a pending job hash in no set", UNTOUCHED, where="nowhere"),
        Bad(
            "orphan-garbage",
            "a garbage job hash in no set",
            UNTOUCHED,
            where="nowhere",
            fields={"payload": b"\xc1", "state": "bogus"},
        ),
    ]
    return items


def good_fields(item: Bad, seq: int, now_ms: int) -> dict[str, bytes | str | int]:
    """The hash enqueue.lua would have written for this item, before the damage."""
    tag = item.id if isinstance(item.id, str) else item.id.decode(errors="replace")
    fields: dict[str, bytes | str | int] = {
        "id": item.id,
        "task": TASK,
        "payload": payload(tag),
        "priority": 1,
        "max_attempts": 3,
        "timeout": "",
        "attempts": 0,
        "created_at": now_ms,
        "state": "pending",
        "seq": seq,
    }
    if item.where == "scheduled":
        fields.update(state="scheduled", scheduled_at=now_ms - 1000)
    elif item.where == "running":
        fields.update(state="running", attempts=1, started_at=now_ms - 120_000, token="lost-worker-token")
    return fields


def job_key(q: QueueKeys, job_id: str | bytes) -> bytes:
    raw = job_id if isinstance(job_id, bytes) else job_id.encode()
    return q.prefix.encode() + b"job:" + raw


WRONG_BODIES = {
    "string": lambda pipe, key: pipe.set(key, "not a hash"),
    "list": lambda pipe, key: pipe.rpush(key, "not", "a", "hash"),
    "set": lambda pipe, key: pipe.sadd(key, "not a hash"),
    "zset": lambda pipe, key: pipe.zadd(key, {"not a hash": 1}),
}


def seed(client: redis.Redis, items: list[Bad], queue: str = QUEUE) -> None:
    """Write every item straight into Redis, as a buggy or hostile client would."""
    q = QueueKeys(queue)
    now_ms = int(client.time()[0]) * 1000
    scores = {
        "pending": lambda seq: 2 * PRIORITY_BAND + seq,
        "scheduled": lambda seq: now_ms - 1000,
        "running": lambda seq: now_ms - 60_000,
        "dead": lambda seq: now_ms,
    }
    client.sadd("taskforge:queues", queue)
    pipe = client.pipeline(transaction=False)
    for seq, item in enumerate(items, start=1):
        key = job_key(q, item.id)
        if item.body == "hash":
            fields = good_fields(item, seq, now_ms)
            fields.update(item.fields)
            pipe.hset(key, mapping={k: v for k, v in fields.items() if v is not None})
        elif item.body != "none":
            WRONG_BODIES[item.body](pipe, key)
        if item.where in scores:
            pipe.zadd(getattr(q, item.where), {item.id: scores[item.where](seq)})
    pipe.execute()


def sets_holding(client: redis.Redis, job_id: str | bytes, queue: str = QUEUE) -> list[str]:
    """Which of the queue's sorted sets (the four fixed ones and any group set) hold ``job_id``."""
    q = QueueKeys(queue)
    names = [q.pending, q.scheduled, q.running, q.dead]
    names += [k.decode(errors="replace") for k in client.scan_iter(match=q.prefix + "pending:*")]
    held = []
    for name in names:
        try:
            if client.zscore(name, job_id) is not None:
                held.append(name.removeprefix(q.prefix))
        except redis.ResponseError:  # not a zset: another test's damage
            pass
    return held


def verdict(client: redis.Redis, item: Bad, ran: list[str], queue: str = QUEUE) -> str | None:
    """None when ``item`` ended as it must; else why not, in one line."""
    held = sets_holding(client, item.id, queue)
    tag = item.id if isinstance(item.id, str) else item.id.decode(errors="replace")
    runs = ran.count(tag)
    if item.expect == DROPPED:
        return f"an id with no job hash is still in {held}" if held else None
    if item.expect == UNTOUCHED:
        if runs:
            return f"ran {runs} times; it must not run"
        return f"a job hash no set referred to was put in {held}" if held and item.where == "nowhere" else None
    key = job_key(QueueKeys(queue), item.id)
    kind = client.type(key).decode()
    if kind != "hash":
        return f"its job hash is gone (key type now {kind!r}) and it was {'run' if runs else 'never run'}"
    state = client.hget(key, "state")
    error = (client.hget(key, "error") or b"").decode(errors="replace")
    where = f"state {state!r}, in {held or 'no set'}, error {error[:90]!r}"
    return _final_problem(item, state, error, held, runs, where)


def _final_problem(item: Bad, state: bytes | None, error: str, held: list[str], runs: int, where: str) -> str | None:
    if state not in FINAL_STATES:
        return ("STRANDED (unfinished, in no set): " if not held else "not finished: ") + where
    if state == b"dead" and "dead" not in held:
        return "dead but not in the dead-letter set: " + where
    if state == b"dead" and not error:
        return "dead without a reason: " + where
    if item.expect == RUNS and (state != b"succeeded" or runs != 1):
        return f"must run once and succeed, ran {runs} times: " + where
    if item.expect == DEAD and (state != b"dead" or runs):
        return f"must end dead without running (ran {runs} times): " + where
    if item.expect == DEAD and item.reason.lower() not in error.lower():
        return f"dead, but the error does not mention {item.reason!r}: " + where
    if item.expect == FINISHED and state == b"succeeded" and runs != 1:
        return f"succeeded but ran {runs} times: " + where
    if held not in ([], ["dead"]):
        return "finished but still in " + ", ".join(held)
    return None
