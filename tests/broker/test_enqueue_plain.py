"""A plain job goes to the small enqueue_plain script and is stored exactly as enqueue.lua stores it.

Redis runs a script's whole text per call, so the plain job has a script of
its own (lua/enqueue_plain.lua); every reader of the record, the pending set,
the index and the wake list must see the same thing whichever script wrote it.
"""

from __future__ import annotations

from dataclasses import fields, replace
from typing import Any

import pytest

from taskforge import TaskForge
from taskforge.broker import calls, replies
from taskforge.broker.calls import ScriptCall
from taskforge.broker.keys import QueueKeys, search_index
from taskforge.broker.plain_jobs import is_plain, plain_call
from taskforge.broker.record import NewJob, enqueue_array
from tests.conftest import inspector

from .test_record import CHANGED

Q = QueueKeys("default")
PLAIN = NewJob(id="", task="tests.plain", payload=b"\x92\x90\x80", priority=1, max_attempts=3)

# Plain jobs, each as .delay(), .apply_async(...) or with_options(...) would send it.
PLAIN_SHAPES = {
    "default": PLAIN,
    "chosen": replace(PLAIN, priority=2, max_attempts=5, timeout_ms=1500, fields={"headers": '{"a":"b"}'}),
    "delayed": replace(PLAIN, delay_ms=60_000),
    "due long ago": replace(PLAIN, due_ms=1000),
    "workflow step": replace(PLAIN, workflow="wf-1"),
}

# Each feature only enqueue.lua handles.
NOT_PLAIN = {
    "inherit": replace(PLAIN, inherit=True),
    "limits": replace(PLAIN, limits="1:1000:0"),
    "unique": replace(PLAIN, unique_digest="d", lock_ttl_ms=1000),
    "tick": replace(PLAIN, tick_ms=60_000, lock_ttl_ms=1000),
    "expires_at": replace(PLAIN, expires_at_ms=10**13),
    "expires_in": replace(PLAIN, expires_in_ms=1000),
    "key": replace(PLAIN, key="k"),
    "debounce": replace(PLAIN, debounce="100:0"),
    "key_limits": replace(PLAIN, key="k", key_limits="1:1000:0"),
}


def full_call(job: NewJob) -> ScriptCall[list[str] | replies.EnqueueRefused]:
    """The call enqueue.lua would have taken for ``job`` before the plain script existed."""
    return ScriptCall("enqueue", Q, [0, "", enqueue_array(job, Q), job.payload], replies.decode_enqueue)


def stored(app: TaskForge, job_id: str) -> dict[str, Any]:
    """What the job left behind: its record, where it waits and how, its index entry, less its id and time."""
    client = inspector(app)  # the admin in an ACL-only run: the minimal user runs only what taskforge runs
    record = client.hgetall(Q.job(job_id))
    created = record.pop(b"created_at")
    seq = record.pop(b"seq", None)
    due = record.pop(b"scheduled_at", None)
    index = [m for m in client.zrange(search_index("default"), 0, -1) if m.endswith(job_id.encode())]
    return {
        "record": record,
        "due in": None if due is None else int(due) - int(created),  # a delay counts from the enqueue
        "seq": seq,
        "pending": client.zscore(Q.pending, job_id),
        "scheduled": client.zscore(Q.scheduled, job_id) is not None,
        "index": [m.replace(created.rjust(13, b"0"), b"<time>") for m in index],
    }


@pytest.mark.parametrize("shape", PLAIN_SHAPES)
def test_the_plain_script_stores_what_the_full_one_stores(app: TaskForge, shape: str) -> None:
    scripts = app.broker.link.scripts
    plain_job, full_job = replace(PLAIN_SHAPES[shape], id="plain-1"), replace(PLAIN_SHAPES[shape], id="full-01")
    call = calls.enqueue(Q, max_size=0, resend=False, jobs=[plain_job])
    assert call.name == "enqueue_plain"
    assert scripts.run(call) == ["plain-1"]
    assert scripts.run(full_call(full_job)) == ["full-01"]
    plain, full = stored(app, "plain-1"), stored(app, "full-01")
    assert set(plain["record"]) == set(full["record"]) and plain["record"] == full["record"]
    if plain["seq"] is not None:  # a ready job: the next in line, at the same priority
        assert int(full["seq"]) == int(plain["seq"]) + 1
        assert full["pending"] == plain["pending"] + 1
    assert (plain["scheduled"], plain["due in"]) == (full["scheduled"], full["due in"])
    assert [m.replace(b"7:plain-1", b"<id>") for m in plain["index"]] == [
        m.replace(b"7:full-01", b"<id>") for m in full["index"]
    ]
    assert inspector(app).llen(Q.wake) == 2  # one wake token each


def test_a_plain_delay_is_claimed_as_before(app: TaskForge) -> None:
    @app.task
    def plain() -> None:
        pass

    handle = plain.delay()
    claims, _ = app.broker.claims.dequeue("default", 30_000)
    assert [c.id for c in claims] == [handle.id] and claims[0].task == plain.name


@pytest.mark.parametrize("feature", NOT_PLAIN)
def test_a_job_using_any_other_feature_takes_the_full_script(feature: str) -> None:
    job = replace(NOT_PLAIN[feature], id="j")
    assert not is_plain(job)
    assert calls.enqueue(Q, max_size=0, resend=False, jobs=[job]).name == "enqueue"


@pytest.mark.parametrize("name", [f.name for f in fields(NewJob)])
def test_every_new_job_attribute_reaches_the_plain_call_or_makes_the_job_not_plain(name: str) -> None:
    """An attribute the plain call dropped would be lost for a plain job only."""
    if name == "lock_ttl_ms":
        return  # the TTL of a unique lock or a tick key: read with one of those only, neither plain
    base = replace(PLAIN, id="j")
    job = replace(base, **{name: CHANGED[name]})
    assert not is_plain(job) or plain_call(job, Q) != plain_call(base, Q), f"NewJob.{name} is lost"


def test_a_batch_a_bound_or_a_re_send_takes_the_full_script() -> None:
    job = replace(PLAIN, id="j")
    assert calls.enqueue(Q, max_size=0, resend=False, jobs=[job, replace(job, id="k")]).name == "enqueue"
    assert calls.enqueue(Q, max_size=10, resend=False, jobs=[job]).name == "enqueue"
    assert calls.enqueue(Q, max_size=0, resend=True, jobs=[job]).name == "enqueue"
