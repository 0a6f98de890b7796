"""The script assembly of scripts.py: each script carries exactly the library parts it uses, in an order Lua accepts."""

from __future__ import annotations

import re
from importlib import resources

import pytest

from taskforge.broker import scripts
from taskforge.broker.scripts import (
    SCRIPT_NAMES,
    _lib_chunks,
    _needed,
    code_names,
    library,
    library_files,
    script_source,
)
from tests.conftest import admin_client

LIB_NAMES = {name for name, _ in library()}


def defined_in(source: str) -> set[str]:
    return set(re.findall(r"^local (?:function )?([A-Za-z_][A-Za-z0-9_]*)", source, flags=re.M))


def test_every_script_file_is_registered() -> None:
    files = {
        p.name[:-4]
        for p in resources.files("taskforge.broker").joinpath("lua").iterdir()
        if p.name.endswith(".lua") and not p.name.startswith("_")
    }
    assert files == set(SCRIPT_NAMES)


@pytest.mark.parametrize("name", SCRIPT_NAMES)
def test_each_library_name_a_script_uses_is_defined_before_its_body(name: str) -> None:
    """Names in comments and strings bring no definition (a script runs its whole text per call); code ones must."""
    source = script_source(name)
    used = code_names(source) & LIB_NAMES
    assert used <= defined_in(source)


@pytest.mark.parametrize("name", SCRIPT_NAMES)
def test_every_name_a_definition_uses_is_defined_above_it(name: str) -> None:
    """A Lua local is seen only below its definition: above it the name is a global, which Redis refuses at run time.

    So a misplaced helper compiles, and fails only when a call reaches it;
    this checks the linked text of every script, definition by definition.
    """
    body = resources.files("taskforge.broker").joinpath("lua", f"{name}.lua").read_text(encoding="utf-8")
    linked = script_source(name).removesuffix(body)
    above: set[str] = set()
    for definition, text in _lib_chunks(linked):
        early = (code_names(text) & LIB_NAMES) - above - {definition}
        assert not early, f"{name}: {definition} uses {sorted(early)} above their definitions"
        above.add(definition)
    assert above == defined_in(linked), f"{name}: the linked text holds a definition the check did not see"


def test_a_definition_goes_after_those_it_uses_wherever_its_file_puts_it() -> None:
    chunks = [
        ("late", "local function late()\n  return EARLY .. helper()\nend"),
        ("UNUSED", "local UNUSED = 1"),
        ("helper", "local function helper()\n  return EARLY\nend"),
        ("EARLY", "-- no use of late here, only a word\nlocal EARLY = 'helper'"),
    ]
    linked = _needed(chunks, "return late()")
    assert [name for name, _ in _lib_chunks(linked)] == ["EARLY", "helper", "late"]


def test_a_library_file_opening_comment_goes_into_no_script() -> None:
    room = "-- This room: helpers (names FOO).\n\n-- FOO's own comment.\nlocal FOO = 1\n"
    assert _lib_chunks(room) == [("FOO", "-- FOO's own comment.\nlocal FOO = 1")]


def test_comments_and_strings_are_not_uses() -> None:
    text = "local X = 'wake' .. \"PENDING\" -- wake\n--[[ BAND ]] local y = [==[ TURNS ]==] .. SEQ"
    assert code_names(text) & {"wake", "PENDING", "BAND", "TURNS", "SEQ"} == {"SEQ"}


def test_the_readme_names_every_room_of_the_library() -> None:
    readme = resources.files("taskforge.broker").joinpath("lua").joinpath("README.md").read_text(encoding="utf-8")
    listed = re.findall(r"^\| `(\w+\.lua)` \|", readme, re.M)
    assert sorted(listed) == sorted(library_files()), "lua/README.md's table of rooms and lua/lib/ disagree"


def test_small_scripts_leave_the_hot_path_helpers_out() -> None:
    assert "claim_ready" not in defined_in(script_source("progress"))
    assert "claim_ready" in defined_in(script_source("succeed"))


def test_every_assembled_script_compiles_in_redis(redis_url: str) -> None:
    client = admin_client(redis_url)
    for name in SCRIPT_NAMES:
        assert client.script_load(script_source(name))


def test_a_name_defined_in_two_rooms_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """One would hide the other in every script that carries both: refused when the library is read."""
    monkeypatch.setattr(scripts, "library_files", lambda: {"a.lua": "local X = 1\n", "b.lua": "local X = 2\n"})
    with pytest.raises(ValueError, match=r"\['X'\]"):
        scripts.library.__wrapped__()
