"""The job record's field names: declared once in record.py, and the Lua uses exactly those."""

from __future__ import annotations

import re
from importlib import resources

from taskforge.broker.record import RECORD_FIELDS, Field, job_info
from taskforge.job import FailureKind, JobState, Priority
from taskforge.serialization import dumps, dumps_call

LUA = resources.files("taskforge.broker").joinpath("lua")
# Lowercase string literals in the Lua that are not job fields, and why.
NOT_FIELDS = {
    *(s.value for s in JobState),  # values of the state field
    "aborted", "corrupt", "worker_lost", "expired",  # values of the failure field the scripts write themselves
    "hash", "none", "zset",  # TYPE replies
    "number", "table",  # Lua type() names
    "ok",  # the status field of a TYPE reply
    "limits", "wake",  # key suffixes (the seq key shares its name with the seq field)
    "failed",  # with "succeeded": the fields of a per-minute stats hash
    "string",  # Lua type() name
    "outbox", "open", "done",  # key suffixes: an outbox, a workflow's set and done list (and set 'waiting')
    "gone",  # workflow scripts' reply: no such workflow
    "failed_step", "on_failure", "settled", "steps",  # fields of a workflow's record (workflows/handle.py reads them)
    "ending",  # workflow_resume's reply: dead, but its death is not settled yet
    "drop", "revive",  # replan_steps' phases
}  # fmt: skip


def lua_code() -> str:
    """Every script and the library, without comments."""
    texts = [p.read_text(encoding="utf-8") for p in LUA.iterdir() if p.name.endswith(".lua")]
    return "\n".join(re.sub(r"--.*", "", text) for text in texts)


def test_the_lua_uses_exactly_the_declared_fields() -> None:
    literals = set(re.findall(r"'([a-z_]+)'", lua_code()))
    assert literals - NOT_FIELDS == RECORD_FIELDS, (
        f"in the Lua, not in record.Field: {sorted(literals - NOT_FIELDS - RECORD_FIELDS)}; "
        f"in record.Field, not in the Lua: {sorted(RECORD_FIELDS - literals)}"
    )


def failure_writes(source: str) -> set[str]:
    """The fixed failure kinds a script writes: a literal HSET pair, a bury's kind, or an ``extra`` pair."""
    code = re.sub(r"--.*", "", source)
    return set(re.findall(r"'failure', '([a-z_]+)'", code)) | set(re.findall(r"bury\(id, jk, now, '([a-z_]+)'", code))


def test_the_failure_kinds_each_script_writes_are_the_readme_table() -> None:
    """Every fixed kind a script writes is a FailureKind and a row of lua/README.md's table, and back."""
    readme = LUA.joinpath("README.md").read_text(encoding="utf-8")
    section = readme.split("### Failure kinds", 1)[1].split("\n## ", 1)[0]
    documented = set(re.findall(r"^\| (\w+) \| `([a-z_]+)` \|", section, re.M))
    written = {
        (p.name.removesuffix(".lua"), kind)
        for p in LUA.iterdir()
        if p.name.endswith(".lua")
        for kind in failure_writes(p.read_text(encoding="utf-8"))
    }
    assert written == documented, f"written, not documented: {written - documented}; back: {documented - written}"
    assert {kind for _, kind in written} <= {kind.value for kind in FailureKind}
    assert {kind for _, kind in written} == {"aborted", "corrupt", "worker_lost", "expired"}  # as NOT_FIELDS lists them


def test_the_fields_enqueue_writes_and_a_claim_reads_are_declared() -> None:
    enqueue = LUA.joinpath("enqueue.lua").read_text(encoding="utf-8")
    written = re.search(r"local fields = \{(.*?)\}", enqueue, re.S)
    assert written is not None
    names = re.findall(r"'([a-z_]+)'", written.group(1))
    added = re.findall(r"\badd\('([a-z_]+)'", enqueue)
    lib = LUA.joinpath("_lib.lua").read_text(encoding="utf-8")
    claim = re.search(r"local CLAIM_FIELDS = \{(.*?)\}", lib, re.S)
    assert claim is not None
    assert {*names, *added, *re.findall(r"'([a-z_]+)'", claim.group(1))} <= RECORD_FIELDS
    assert {"id", "task", "payload", "state", "unique", "group"} <= {*names, *added}


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
