"""The job record, declared once in record.py: the Lua, the claim row, JobInfo and the enqueue array follow it.

Each test here fails when a field is added on one side only: a field name
the Lua uses that ``Field`` lacks (or back), an enqueue slot the script
neither stores nor reads, a ``NewJob`` attribute no slot carries, a claim
row whose script side and ``ClaimRow`` disagree, a ``ClaimRow`` field that
``Claim`` drops, a ``JobInfo`` attribute nothing decodes.
"""

from __future__ import annotations

import dataclasses
import json
import re
from importlib import resources
from typing import Any

import pytest

from taskforge.broker import calls
from taskforge.broker.acl import lua_sources
from taskforge.broker.keys import QueueKeys
from taskforge.broker.record import (
    CLAIMED,
    DERIVED,
    ENQUEUE,
    RECORD_FIELDS,
    ROW_HEAD,
    SHOWN,
    Claim,
    ClaimRow,
    Field,
    NewJob,
    claim_of,
    enqueue_array,
    job_info,
    lua_definitions,
)
from taskforge.broker.scripts import Scripts
from taskforge.job import FailureKind, JobInfo, JobState, Priority
from taskforge.serialization import dumps, dumps_call
from tests.conftest import admin_client

LUA = resources.files("taskforge.broker").joinpath("lua")
# Lowercase string literals in the Lua that are not job fields, and why.
NOT_FIELDS = {
    *(s.value for s in JobState),  # values of the state field
    "aborted", "corrupt", "worker_lost", "expired",  # values of the failure field the scripts write themselves
    "crashed",  # the failure fail.lua is given for a child that died under its run: a loss, not an attempt
    "hash", "none", "zset",  # TYPE replies
    "number", "table",  # Lua type() names
    "ok",  # the status field of a TYPE reply
    "limits", "wake", "paused",  # key suffixes (the seq key shares its name with the seq field)
    "turns", "held", "held_head", "key_limits", "lane_jobs", "lane_size",  # key suffixes of keyed jobs' lanes
    "key_turns", "key_turns_at", "fronts",  # open lanes' turns: their hash, the sweep's cursor, the scripts' book
    "failed",  # with "succeeded": the fields of a per-minute stats hash
    "string",  # Lua type() name
    "outbox", "open", "done",  # key suffixes: an outbox, a workflow's set and done list (and set 'waiting')
    "gone",  # workflow scripts' reply: no such workflow
    "failed_step", "on_failure", "settled", "steps",  # fields of a workflow's record (workflows/handle.py reads them)
    "ending",  # workflow_resume's reply: dead, but its death is not settled yet
    "drop", "revive",  # replan_steps' phases
    "reserved", "batches", "next", "slices", "kept", "commit",  # a sliced enqueue's keys, its record's fields, a mode
    "v",  # the one field of a job's stream entry (stream.lua)
    "written",  # stream.lua's reply to a repeat of the item written last
    "index", "index_at", "a", "t", "k", "d", "c",  # the search index, its sweep's place, its entries' prefixes
    "expiring",  # the index entries of finished records, by when each record expires
    "tidy", "forget", "lanes", "jobs", "lane_",  # forget.lua's phases and the names of what holds a job
    "deferred", "depbox",  # depends_on: the jobs held waiting, the ends not yet reported to them
}  # fmt: skip


def lua_code() -> str:
    """Every script and the library, without comments."""
    return "\n".join(re.sub(r"--.*", "", text) for text in lua_sources().values())


def generated() -> str:
    """The definitions record.py writes for the scripts, without comments."""
    return "\n".join(re.sub(r"--.*", "", text) for _, text in lua_definitions())


def test_the_lua_uses_exactly_the_declared_fields() -> None:
    literals = set(re.findall(r"'([a-z_]+)'", lua_code() + generated()))
    assert literals - NOT_FIELDS == RECORD_FIELDS, (
        f"in the Lua, not in record.Field: {sorted(literals - NOT_FIELDS - RECORD_FIELDS)}; "
        f"in record.Field, not in the Lua: {sorted(RECORD_FIELDS - literals)}"
    )


def test_the_scripts_name_only_declared_positions() -> None:
    """The Lua reads the enqueue array and the claim list by the names record.py defines, never by number."""
    names = {name for name, _ in lua_definitions()}
    used = set(re.findall(r"\b(NEW_[A-Z_]+|CLAIMED)\b", lua_code()))
    assert used <= names, f"used in the Lua, not declared in record.py: {sorted(used - names)}"
    enqueue = re.sub(r"--.*", "", LUA.joinpath("enqueue.lua").read_text(encoding="utf-8"))
    numbered = re.findall(r"\bf\[\d+\]", enqueue)
    assert not numbered, f"enqueue.lua reads the array by number: {numbered}; name the slot (NEW_<NAME>) in ENQUEUE"


def test_every_enqueue_slot_is_stored_or_read() -> None:
    enqueue = re.sub(r"--.*", "", LUA.joinpath("enqueue.lua").read_text(encoding="utf-8"))
    unused = [s.name for s in ENQUEUE if s.stored is None and f"NEW_{s.name.upper()}" not in enqueue]
    assert not unused, f"ENQUEUE slots enqueue.lua neither stores nor reads: {unused}"
    assert "NEW_STORED" in enqueue
    names = [s.name for s in ENQUEUE]
    assert len(set(names)) == len(names)
    stored = [s.stored for s in ENQUEUE if s.stored is not None]
    assert len(set(stored)) == len(stored)


BASE = NewJob(id="j", task="t", payload=b"p", priority=1, max_attempts=1)
# A value other than BASE's for each NewJob attribute.
CHANGED: dict[str, Any] = {
    "id": "j2",
    "task": "t2",
    "payload": b"p2",
    "priority": 2,
    "max_attempts": 5,
    "timeout_ms": 1500,
    "due_ms": 10**12,
    "delay_ms": 700,
    "inherit": True,
    "limits": "1:1000:0",
    "unique_digest": "d",
    "lock_ttl_ms": 900,
    "tick_ms": 10**12,
    "workflow": "w",
    "expires_at_ms": 10**12 + 5,
    "expires_in_ms": 600,
    "fields": {"keep_ms": "1000"},
    "key": "k2",
    "debounce": "500:0",
    "key_limits": "0:1000:2",
}


@pytest.mark.parametrize("name", [f.name for f in dataclasses.fields(NewJob)])
def test_every_new_job_attribute_travels(name: str) -> None:
    """An attribute no ENQUEUE slot carries would be dropped on the way to Redis."""
    assert name in CHANGED, f"NewJob.{name}: give it a changed value in CHANGED"
    q = QueueKeys("contract")
    job = dataclasses.replace(BASE, **{name: CHANGED[name]})
    if name == "payload":  # the one attribute that travels beside the array, as its own argument
        assert calls.enqueue(q, max_size=0, resend=True, jobs=[job]).args[-1] == CHANGED[name]
        return
    assert enqueue_array(job, q) != enqueue_array(BASE, q), f"NewJob.{name} is carried by no ENQUEUE slot"


def failure_writes(source: str) -> set[str]:
    """The fixed failure kinds a script writes: a literal HSET pair, a bury's kind, or an ``extra`` pair."""
    code = re.sub(r"--.*", "", source)
    return set(re.findall(r"'failure', '([a-z_]+)'", code)) | set(re.findall(r"bury\(id, jk, now, '([a-z_]+)'", code))


def test_the_failure_kinds_each_script_writes_are_the_readme_table() -> None:
    """Every fixed kind a script writes is a FailureKind and a row of lua/README.md's table, and back."""
    readme = LUA.joinpath("README.md").read_text(encoding="utf-8")
    section = readme.split("### Failure kinds", 1)[1].split("\n## ", 1)[0]
    documented = set(re.findall(r"^\| ([\w/]+) \| `([a-z_]+)` \|", section, re.M))  # a script, or lib/<room>
    sources = lua_sources()
    written = {(name.removesuffix(".lua"), kind) for name, text in sources.items() for kind in failure_writes(text)}
    assert written == documented, f"written, not documented: {written - documented}; back: {documented - written}"
    assert {kind for _, kind in written} <= {kind.value for kind in FailureKind}
    # As NOT_FIELDS lists them, and interrupted, which is a field (the count of runs cut short) too.
    assert {kind for _, kind in written} == {"aborted", "corrupt", "worker_lost", "expired", "interrupted"}


def test_the_fields_enqueue_writes_and_a_claim_reads_are_declared() -> None:
    enqueue = LUA.joinpath("enqueue.lua").read_text(encoding="utf-8")
    written = re.search(r"local fields = \{(.*?)\}", enqueue, re.S)
    assert written is not None
    names = re.findall(r"'([a-z_]+)'", written.group(1))
    added = re.findall(r"\badd\('([a-z_]+)'", enqueue)
    stored = [s.stored.value for s in ENQUEUE if s.stored is not None]
    assert {*names, *added, *stored, *(f.value for f in CLAIMED)} <= RECORD_FIELDS
    assert {"task", "payload", "state", "unique", "group"} <= {*names, *added, *stored}


def claim_row_source() -> tuple[str, list[str], list[str]]:
    """(claim_row's body, the names of the values it puts first, the fields CLAIM_FIELDS reads before CLAIMED)."""
    lib = re.sub(r"--.*", "", LUA.joinpath("lib", "claim.lua").read_text(encoding="utf-8"))
    body = re.search(r"local function claim_row\(.*?\n(.*?)\nend\n", lib, re.S)
    head = re.search(r"out\[n \+ 1\](?:, out\[n \+ \d\])* = (.*)", body.group(1) if body else "")
    reads = re.search(r"local CLAIM_FIELDS = \{(.*?)\}", lib, re.S)
    assert body and head and reads, "lib/claim.lua: claim_row and CLAIM_FIELDS are no longer where this test looks"
    first = [re.match(r"\w+", v.strip()).group(0) for v in head.group(1).split(",")]  # type: ignore[union-attr]
    own = re.findall(r"'([a-z_]+)'", reads.group(1))
    assert reads.group(1).rstrip().endswith("unpack(CLAIMED)"), "CLAIM_FIELDS must end with the declared CLAIMED"
    own_count = re.search(r"local CLAIM_OWN = (\d+)", lib)
    assert own_count and int(own_count.group(1)) == len(own), "CLAIM_OWN must count the fields before CLAIMED"
    return body.group(1), first, own


def test_the_claim_row_the_script_builds_is_the_declared_one() -> None:
    _, first, _ = claim_row_source()
    assert tuple(first) == ClaimRow._fields[:ROW_HEAD], (
        f"claim_row puts {first} first; ClaimRow declares {ClaimRow._fields[:ROW_HEAD]}"
    )


def test_every_claimed_field_reaches_the_claim() -> None:
    """A ClaimRow value Claim drops, or a Claim attribute no row value fills, fails here."""
    row = ClaimRow(
        id=b"j",
        attempts=2,
        damage=b"",
        task=b"t.x",
        payload=b"",
        max_attempts=b"7",
        timeout=b"1500",
        priority=b"3",
        inherit=b"1",
        workflow=b"w1",
        headers=b'{"k":"v"}',
        scheduled_at=b"1700000000000",
        created_at=b"1699999999000",
    )
    claim = claim_of(row, "j", "q", "tok", ((1,), {"a": 2}))
    expected = {
        "id": "j",
        "queue": "q",
        "token": "tok",
        "task": "t.x",
        "args": (1,),
        "kwargs": {"a": 2},
        "attempts": 2,
        "max_attempts": 7,
        "timeout": 1.5,
        "priority": 3,
        "inherit": True,
        "workflow": "w1",
        "headers": {"k": "v"},
        "scheduled_at": 1700000000000,
        "created_at": 1699999999000,
    }
    names = {f.name for f in dataclasses.fields(Claim)}
    dropped = set(ClaimRow._fields) - {"payload", "damage"} - names
    assert not dropped, f"ClaimRow values Claim has no attribute for: {sorted(dropped)}"
    unfilled = names - set(ClaimRow._fields) - {"queue", "token", "args", "kwargs"}
    assert not unfilled, f"Claim attributes no ClaimRow value fills: {sorted(unfilled)}"
    assert dataclasses.asdict(claim) == expected


def test_job_info_has_exactly_the_declared_attributes() -> None:
    attributes = [f.name for f in dataclasses.fields(JobInfo)]
    assert not set(SHOWN) & set(DERIVED)
    assert set(attributes) == set(SHOWN) | set(DERIVED), (
        f"JobInfo attributes nothing decodes: {sorted(set(attributes) - set(SHOWN) - set(DERIVED))}; "
        f"declared, not in JobInfo: {sorted((set(SHOWN) | set(DERIVED)) - set(attributes))}"
    )
    info = job_info("j", "q", {Field.PAYLOAD.key: dumps_call((), {})})
    assert list(json.loads(json.dumps(info.to_dict(), default=str))) == attributes


def test_a_job_travels_as_declared(redis_url: str) -> None:
    """Through the real scripts: every stored slot lands in its field, and the claim row holds what ClaimRow says."""
    client = admin_client(redis_url)
    scripts = Scripts(client)
    q = QueueKeys("contract")
    job = NewJob(
        id="j1",
        task="t.x",
        payload=dumps_call((1,), {}),
        priority=3,
        max_attempts=7,
        timeout_ms=1500,
        inherit=True,
        workflow="w1",
        fields={"headers": '{"k":"v"}'},
        key="account-1",
    )
    assert scripts.run(calls.enqueue(q, max_size=0, resend=False, jobs=[job])) == ["j1"]
    record = client.hgetall(q.job("j1"))
    values = json.loads(enqueue_array(job, q))
    for position, slot in enumerate(ENQUEUE):
        if slot.stored is not None:
            assert record[slot.stored.key] == str(values[position]).encode(), slot.name
    call = calls.dequeue(q, token="tok", lease_ms=60000, promote_limit=10, count=1)
    (row,) = scripts.run(call).rows
    assert len(row) == len(ClaimRow._fields)
    assert (row.id, row.attempts, row.damage) == (b"j1", 1, b"")
    for field in CLAIMED:
        assert getattr(row, field.value) == record.get(field.key, b""), field.value
    client.close()


def test_a_record_decodes_into_job_info() -> None:
    fields = {
        Field.TASK.key: b"app.add",
        Field.PAYLOAD.key: dumps_call((1, 2), {}),
        Field.PRIORITY.key: b"3",
        Field.STATE.key: b"running",
        Field.ATTEMPTS.key: b"1",
        Field.PROGRESS.key: b"0.5",
    }
    info = job_info("j1", "q", fields)
    assert (info.task, info.args, info.state, info.attempts, info.progress) == (
        "app.add",
        (1, 2),
        JobState.RUNNING,
        1,
        0.5,
    )
    assert info.priority is Priority.CRITICAL
    assert str(info.priority) == "Priority.CRITICAL" and info.to_dict()["priority"] == "critical"


def test_junk_in_a_record_shows_as_an_error_not_an_exception() -> None:
    info = job_info("j2", "q", {Field.STATE.key: b"limbo", Field.PRIORITY.key: b"9", Field.PAYLOAD.key: b"\xc1"})
    assert info.state is JobState.DEAD and info.priority is Priority.NORMAL
    assert info.error is not None and info.error.startswith("CorruptPayload")


def test_error_type_and_progress_meta_decode_into_job_info() -> None:
    fields = {
        Field.STATE.key: b"running",
        Field.ERROR.key: b"KeyError: 'k'",
        Field.FAILURE.key: b"exception",
        Field.ERROR_TYPE.key: b"builtins.KeyError",
        Field.PROGRESS.key: b"0.3",
        Field.PROGRESS_META.key: dumps({"done": 3, "total": 10}),
    }
    info = job_info("j3", "q", fields)
    assert (info.error_type, info.progress_meta) == ("builtins.KeyError", {"done": 3, "total": 10})
    assert info.to_dict()["error_type"] == "builtins.KeyError"


def test_junk_progress_meta_reads_as_none() -> None:
    for raw in (b"", b"\xc1", b"\xff\xff junk"):
        fields = {Field.STATE.key: b"running", Field.PAYLOAD.key: dumps_call((), {}), Field.PROGRESS_META.key: raw}
        info = job_info("j4", "q", fields)
        assert info.progress_meta is None and info.error is None
