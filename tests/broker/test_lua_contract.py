"""The Python–Lua seam, checked without Redis: headers against calls.py, state writes against the state table.

Each script's header (``-- ARGV[n] name``) must name, in order, the
keyword-only parameters of its function in ``calls.py``, which must send
them in that order; the script must read every argument it declares and no
other. Every ``state`` a script writes, with the helpers it carries, must
be a row of the state table in ``lua/README.md``, and every row must be
written by its script.
"""

from __future__ import annotations

import inspect
import re
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from taskforge.broker import calls
from taskforge.broker.keys import QueueKeys, WorkflowKeys
from taskforge.broker.record import NewJob
from taskforge.broker.scripts import SCRIPT_NAMES, library_files, script_source
from taskforge.job import FailureKind, JobState

LUA = resources.files("taskforge.broker").joinpath("lua")
README = Path(__file__).resolve().parents[2] / "taskforge" / "broker" / "lua" / "README.md"
HEADER = re.compile(r"^-- (KEYS|ARGV)\[(\d+)(\.\.)?\]\s+(\w+)", re.M)
Q = QueueKeys("contract")
W = WorkflowKeys("contract")
WORKFLOW_SCRIPTS = tuple(name for name in SCRIPT_NAMES if name.startswith("workflow_"))


def routed_by(name: str) -> QueueKeys | WorkflowKeys:
    """A queue's scripts run in its slot; a workflow's in the workflow's own."""
    return W if name in WORKFLOW_SCRIPTS else Q


def body(name: str) -> str:
    return LUA.joinpath(*f"{name}.lua".split("/")).read_text(encoding="utf-8")  # a script, or lib/<room>


def header(source: str) -> tuple[list[str], list[str], str | None]:
    """(KEYS names, fixed ARGV names from ARGV[1], the name of a variable tail or None)."""
    keys: list[str] = []
    argv: list[str] = []
    tail = None
    for kind, index, rest, name in HEADER.findall(source):
        names = keys if kind == "KEYS" else argv
        assert tail is None, f"{name}: nothing may follow the variable tail ARGV[n..]"
        assert int(index) == len(names) + 1, f"{kind}[{index}] {name} is out of order"
        if rest:
            tail = name
        else:
            names.append(name)
    return keys, argv, tail


def python_params(name: str) -> list[str]:
    signature = inspect.signature(calls.CALLS[name])
    return [p.name for p in signature.parameters.values() if p.kind is inspect.Parameter.KEYWORD_ONLY]


def sample(param: inspect.Parameter, index: int) -> Any:
    """A value for one parameter that its encoding leaves recognisable in the ARGV sent."""
    kind = str(param.annotation)
    if param.name == "jobs":
        return [NewJob(id="j", task="t", payload=b"p", priority=1, max_attempts=1)]
    if param.name == "claims":
        return [("id-1", "token-1")]
    if param.name == "results":
        return [("id-1", "token-1", b"r")]
    if param.name == "job_ids":
        return ["a", "b"]
    if param.name == "fields":
        return [("spec:0", b"s"), ("queue:0", "q")]
    if kind == "bool":
        return True
    if kind == "FailureKind":
        return FailureKind.TIMEOUT
    if kind.startswith("bytes"):
        return f"<{param.name}>".encode()
    if kind.startswith("str"):
        return f"<{param.name}>"
    if kind.startswith("int"):
        return 1000 + index
    if kind == "float":
        return 0.25
    raise AssertionError(f"no sample for {param.name}: {kind}")


@pytest.mark.parametrize("name", SCRIPT_NAMES)
def test_the_header_names_the_parameters_of_the_python_call(name: str) -> None:
    keys, argv, tail = header(body(name))
    key = "record" if name in WORKFLOW_SCRIPTS else "pending"
    assert keys == [key] and argv[:1] == ["prefix"], f"{name}.lua: KEYS[1] {key}, ARGV[1] prefix"
    assert python_params(name) == argv[1:] + ([tail] if tail else []), (
        f"{name}.lua declares ARGV {argv[1:]} (tail {tail}); calls.{calls.CALLS[name].__name__} takes "
        f"{python_params(name)}"
    )


@pytest.mark.parametrize("name", SCRIPT_NAMES)
def test_the_python_call_sends_each_argument_where_the_header_says(name: str) -> None:
    _, argv, tail = header(body(name))
    params = [p for p in inspect.signature(calls.CALLS[name]).parameters.values() if p.kind is p.KEYWORD_ONLY]
    values = {p.name: sample(p, i) for i, p in enumerate(params)}
    keys = routed_by(name)
    call = calls.CALLS[name](keys, **values)
    assert call.name == name and call.keys == [keys.route] and call.argv[0] == keys.prefix
    for position, arg in enumerate(argv[1:]):
        value = values[arg]
        sent = call.args[position] if position < len(call.args) else None
        as_list = isinstance(value, list) and sent == ",".join(map(str, value))  # a comma-separated list
        assert sent in (value, repr(value)) or (value is True and sent == "1") or as_list, (
            f"{name}: ARGV[{position + 2}] should carry {arg}, got {sent!r}"
        )
    if tail:
        assert len(call.args) > len(argv) - 1, f"{name}: the {tail} tail was not sent"
    else:
        assert len(call.args) == len(argv) - 1, f"{name}: sends {len(call.args)} arguments after the prefix"


@pytest.mark.parametrize("name", SCRIPT_NAMES)
def test_the_script_reads_what_its_header_declares_and_nothing_else(name: str) -> None:
    source = body(name)
    _, argv, tail = header(source)
    code = "\n".join(line for line in source.splitlines() if not line.lstrip().startswith("--"))
    read = {int(i) for i in re.findall(r"ARGV\[(\d+)\]", code)}
    declared = set(range(2, len(argv) + 1))
    assert read == declared, f"{name}.lua reads ARGV{sorted(read)} but its header declares ARGV{sorted(declared)}"
    assert ("#ARGV" in code) == (tail is not None), f"{name}.lua: a variable tail is read with #ARGV, and declared"


@pytest.mark.parametrize("room", library_files())
def test_the_library_reads_only_the_prefix(room: str) -> None:
    lib = library_files()[room]
    code = "\n".join(line for line in lib.splitlines() if not line.lstrip().startswith("--"))
    assert set(re.findall(r"ARGV\[(\d+)\]", code)) <= {"1"}, f"lib/{room} reads ARGV past the prefix"


# -- the state table ----------------------------------------------------------

STATE_WRITES = (
    re.compile(r"redis\.p?call\('HSET'[^)]*?'state',\s*'(\w+)'"),  # a literal HSET
    re.compile(r"\badd\('state',\s*'(\w+)'\)"),  # enqueue's field list
    re.compile(r"(?<!function )\bfinish\([^,()]+,\s*[^,()]+,\s*'(\w+)'"),  # the end of a job, via lib/finish.lua
)


def state_table(heading: str = "States and transitions") -> list[tuple[set[str], str, str]]:
    """(from states, to state, script) per row of the table under ``heading`` in lua/README.md."""
    text = README.read_text(encoding="utf-8")
    section = text.split(f"## {heading}", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[0] not in ("from", "") and not set(cells[0]) <= {"-"}:
            rows.append(({s.strip() for s in cells[0].split(",")}, cells[1], cells[2]))
    return rows


def state_writes(source: str) -> set[str]:
    """Every state ``source`` writes; fails on a state write this test cannot read."""
    found = {state for pattern in STATE_WRITES for state in pattern.findall(source)}
    unread = re.findall(r"redis\.p?call\('HSET'[^)]*?'state',\s*(?!')(\w+)", source)
    unread += re.findall(r"(?<!function )\bfinish\([^,()]+,\s*[^,()]+,\s*(?!')(\w+)", source)
    assert unread == [], f"a state written from a variable ({unread}): write a literal so the table can be checked"
    return found


def test_the_table_names_only_real_states_and_scripts() -> None:
    rows = state_table()
    assert len(rows) >= 19
    states = {s.value for s in JobState}
    for sources, target, script in rows:
        assert script in SCRIPT_NAMES, script
        assert sources <= states | {"(new)"}, sources
        assert target in states | {"(deleted)"}, target


@pytest.mark.parametrize("name", SCRIPT_NAMES)
def test_every_state_a_script_writes_is_a_row_of_the_table_and_back(name: str) -> None:
    in_table = {target for _, target, script in state_table() if script == name and target != "(deleted)"}
    written = state_writes(script_source(name))
    assert written == in_table, (
        f"{name} writes states {sorted(written)}; lua/README.md gives it {sorted(in_table)}: "
        "update the table with the script"
    )


def test_the_state_write_finder_sees_each_form_of_write() -> None:
    assert state_writes("redis.call('HSET', jk, 'state', 'pending', 'seq', 1)") == {"pending"}
    assert state_writes("add('state', 'scheduled')") == {"scheduled"}
    assert state_writes("finish(id, jk, 'cancelled', now_ms(), ttl)") == {"cancelled"}
    with pytest.raises(AssertionError, match="variable"):
        state_writes("redis.call('HSET', jk, 'state', target)")


# -- the workflow state table -------------------------------------------------

WORKFLOW_WRITES = (
    re.compile(r"\bend_workflow\(rk,\s*'(\w+)'"),
    re.compile(r"\{'state',\s*'(\w+)'"),  # a record's first fields
)


@pytest.mark.parametrize("name", WORKFLOW_SCRIPTS)
def test_every_workflow_state_a_script_writes_is_a_row_of_its_table_and_back(name: str) -> None:
    source = body(name)
    assert not re.findall(r"\bend_workflow\(rk,\s*(?!')(\w+)", source), f"{name}: write a literal state"
    written = {state for pattern in WORKFLOW_WRITES for state in pattern.findall(source)}
    in_table = {target for _, target, script in state_table("Workflows") if script == name}
    assert written == in_table, (
        f"{name} writes workflow states {sorted(written)}; lua/README.md gives {sorted(in_table)}"
    )


def test_the_workflow_table_names_only_workflow_states() -> None:
    from taskforge.workflows.handle import WorkflowState

    rows = state_table("Workflows")
    assert len(rows) >= 5
    for sources, target, script in rows:
        assert script in WORKFLOW_SCRIPTS
        assert sources <= {s.value for s in WorkflowState} | {"(new)"} and target in {s.value for s in WorkflowState}


def top_level_args(code: str, start: int) -> list[str]:
    """The arguments of the call whose '(' is at ``start``, split at its own commas (not nested or quoted ones)."""
    depth, args, current, quoted = 0, [], "", False
    for char in code[start:]:
        if char == "'":
            quoted = not quoted
        elif quoted:
            pass
        elif char == "(":
            depth += 1
            if depth == 1:
                continue
        elif char == ")":
            depth -= 1
            if depth == 0:
                args.append(current.strip())
                return args
        elif char == "," and depth == 1:
            args.append(current.strip())
            current = ""
            continue
        current += char
    raise AssertionError("unbalanced call")


@pytest.mark.parametrize("name", [*SCRIPT_NAMES, *(f"lib/{room.removesuffix('.lua')}" for room in library_files())])
def test_every_failure_written_comes_with_its_error_type(name: str) -> None:
    """``failure`` and ``error_type`` go together: a literal pair, or a ``bury`` given its error_type."""
    code = "\n".join(line for line in body(name).splitlines() if not line.lstrip().startswith("--"))
    assert code.count("'failure'") == code.count("'error_type'"), f"{name}.lua writes failure without error_type"
    for call in re.finditer(r"\bbury\(", code):
        args = top_level_args(code, call.end() - 1)
        assert len(args) == 8 and args[7] not in ("", "nil"), f"{name}.lua: bury(...) without an error_type: {args}"
