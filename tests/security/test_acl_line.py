"""The documented ACL line (docs/reference/acl.md) is the one the scripts and the client need (no server needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from taskforge.broker.acl import CLIENT_COMMANDS, USER_PREFIX, acl_line, acl_rules, lua_sources, script_commands

ACL_PAGE = Path(__file__).parents[2] / "docs" / "reference" / "acl.md"


def test_the_acl_page_holds_the_generated_line() -> None:
    lines = [line for line in ACL_PAGE.read_text().splitlines() if line.startswith(USER_PREFIX)]
    assert lines == [acl_line()], "regenerate the ACL page's line with `python -m taskforge.broker.acl`"


def test_the_commands_the_hand_kept_line_missed_are_granted() -> None:
    """Chains and groups (SDIFF, SISMEMBER), the wake list's trim (LTRIM), the enqueue's counter (DECRBY)."""
    rules = set(acl_rules())
    assert {"+sdiff", "+sismember", "+ltrim", "+decrby"} <= rules


def test_every_script_is_read() -> None:
    sources = lua_sources()
    assert "lib/claim.lua" in sources and "enqueue.lua" in sources
    assert script_commands() >= {"hset", "zadd", "zpopmin", "sadd"}


def test_literal_pcall_and_chunked_commands_are_found_and_comments_are_not() -> None:
    source = """
    redis.call('HSET', k, 'a', 1)
    redis.pcall("zAdd", k, 1, 'm')
    in_chunks('SADD', k, values)
    -- redis.call('FLUSHALL')
    local function in_chunks(command, key, values) redis.call(command, key, unpack(values)) end
    """
    assert script_commands({"x.lua": source}) == {"hset", "zadd", "sadd"}


def test_a_command_held_in_a_variable_is_refused() -> None:
    """The line could not name it: the script must name its command literally (or through in_chunks)."""
    with pytest.raises(ValueError, match="x.lua.*'verb'"):
        script_commands({"x.lua": "local verb = 'DEL'\nredis.call(verb, KEYS[1])"})


def test_client_commands_are_lower_case_and_unique() -> None:
    assert len(set(CLIENT_COMMANDS)) == len(CLIENT_COMMANDS)
    assert all(c == c.lower() and " " not in c for c in CLIENT_COMMANDS)
