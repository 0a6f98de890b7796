"""The workflow record's fields: declared once in ``workflows/record.py``, and the Lua uses exactly those.

The scripts that read and write a workflow's record are the ``workflow_*``
scripts and the library's workflow room, ``lua/lib/workflows.lua``. A field
added to the Lua but not to ``WorkflowField`` or ``StepField`` (or the other
way round) fails here, as does a field the client writes when the record is
created that is not declared.
"""

from __future__ import annotations

import re
from importlib import resources

from taskforge import TaskForge, chain, group
from taskforge.workflows.launch import record_fields
from taskforge.workflows.plan import make_plan
from taskforge.workflows.record import CLIENT_ONLY, StepField, WorkflowField

LUA = resources.files("taskforge.broker").joinpath("lua")
# String literals in the workflow scripts that are not fields of a workflow's record, and why.
NOT_FIELDS = {
    "running", "succeeded", "dead", "cancelled",  # values of the state field
    "gone", "ending",  # replies: no such workflow; dead, its death not settled yet
    "open", "waiting", "done", "wait:",  # key suffixes: sets of steps, the done list, what step j waits for
    "1", "",  # the value of settled; the empty value of a missing field
    "stage:", "commit",  # workflow_create's modes for a big workflow, staged in pieces
}  # fmt: skip
DECLARED = {f.value for f in WorkflowField} | {f.at("") for f in StepField}


def workflow_lua() -> str:
    """The code (comments dropped) of every script that touches a workflow's record."""
    texts = [p.read_text(encoding="utf-8") for p in LUA.iterdir() if re.fullmatch(r"workflow_\w+\.lua", p.name)]
    texts.append(LUA.joinpath("lib", "workflows.lua").read_text(encoding="utf-8"))
    return "\n".join(re.sub(r"--.*", "", text) for text in texts)


def lua_fields() -> set[str]:
    """Field names among the Lua's string literals: 'name', a 'name:' prefix, or a '^name:(%d+)$' pattern."""
    found = set()
    for literal in re.findall(r"'([^'\\]*)'", workflow_lua()):
        pattern = re.fullmatch(r"\^([a-z_]+:)\(%d\+\)\$", literal)
        if pattern:
            found.add(pattern.group(1))
        elif re.fullmatch(r"[a-z_]*:?", literal) and literal not in NOT_FIELDS:
            found.add(literal)
    return found


def test_the_lua_uses_exactly_the_declared_fields() -> None:
    used = lua_fields()
    expected = DECLARED - CLIENT_ONLY
    assert used == expected, (
        f"in the Lua, not in workflows/record.py: {sorted(used - expected)}; "
        f"in workflows/record.py, not in the Lua: {sorted(expected - used)}"
    )
    assert not used & CLIENT_ONLY, f"declared client-only, yet a script names them: {sorted(used & CLIENT_ONLY)}"


def test_the_record_a_launch_writes_has_only_declared_fields() -> None:
    app = TaskForge("record", broker="memory://")

    @app.task
    def add(a: int, b: int = 0) -> int:
        return a + b

    @app.task
    def total(values: list[int]) -> int:
        return sum(values)

    root = chain(add.s(1), group(add.s(2), add.s(3)), total.s())
    names = {name for name, _ in record_fields(make_plan(root), add.si(0))}
    undeclared = {name for name in names if name not in DECLARED and name.partition(":")[0] + ":" not in DECLARED}
    assert not undeclared, f"launch writes fields workflows/record.py does not declare: {sorted(undeclared)}"
