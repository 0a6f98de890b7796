"""The Redis ACL rules a taskforge user needs, read from the scripts themselves.

A hand-kept list drifted: chains and groups needed ``SDIFF`` and
``SISMEMBER``, the wake list's trim ``LTRIM``, the enqueue's counter
``DECRBY``, and the documented line had none of them (a denial inside a script
after its first writes was even hidden by the automatic re-send). So the
commands run inside scripts are read from the ``.lua`` files (every
``redis.call``/``redis.pcall`` with a literal name, and the command handed to
``in_chunks``), and only the commands the Python client sends on its own
connection are declared here, next to why each is sent. The line in
``docs/reference/acl.md`` is this module's output (a test compares them), and the ACL-only CI run
proves the union complete.

``python -m taskforge.broker.acl`` prints the ``ACL SETUSER`` line.
"""

from __future__ import annotations

import re
from importlib import resources

from .scripts import library_files

# Sent by the Python side on its own connections, outside any script, grouped by why. Found
# by reading the client code; the ACL-only CI run (the broker, worker, workflow, steps,
# streams, search and dashboard tests as this user alone) fails on any one missing.
CLIENT_COMMANDS: tuple[str, ...] = (
    # connecting: a liveness check, a database other than 0 in the URL
    "ping",
    "select",
    # scripts: every call by SHA; redis-py's pipelined Script asks SCRIPT EXISTS first; a lost script is loaded again
    "evalsha",
    "script|exists",
    "script|load",
    # waits: result() on a job's done list, an idle lane on the wake list, stream(), durability="replicated"
    "blmove",
    "blpop",
    "xread",
    "wait",
    # the broker's clock
    "time",
    # the server check (worker, status, dashboard): eviction policy, AOF, replicas, run id (a restart
    # that lost the data). Not CONFIG, which can read secrets: the RDB schedule is then "unknown"
    "info",
    # reads of the status, search, inspection, workflow and damage views
    "exists",
    "get",
    "type",
    "hget",
    "hgetall",
    "hkeys",
    "hmget",
    "scard",
    "smembers",
    "zcard",
    "zcount",
    "zlexcount",
    "zrandmember",
    "zrange",
    "zrangebyscore",
    "zrevrange",
    "zrevrangebylex",
    # writes outside scripts: worker entries and their expiry, per-minute stats, the workflow ledger, cleanup
    "del",
    "hdel",
    "hincrby",
    "hset",
    "pexpire",
    "sadd",
    "unlink",
    "zadd",
    "zrem",
    "zremrangebyscore",
    # broker.cleanup.clear(): finding the keys of a queue
    "scan",
)

USER_PREFIX = "ACL SETUSER taskforge on >PASSWORD"
KEY_PATTERN = "~taskforge:*"

# redis.call('HSET', ...) / redis.pcall("zadd", ...) / in_chunks('SADD', ...): a literal command name.
_LITERAL_CALL = re.compile(r"""(?:redis\.p?call|in_chunks)\(\s*['"]([A-Za-z]+)['"]""")
# A call whose command is a variable: allowed only inside in_chunks, whose callers are read above.
_VARIABLE_CALL = re.compile(r"""redis\.p?call\(\s*([A-Za-z_][A-Za-z0-9_]*)\s*,""")
_DYNAMIC_OK = {"command"}  # the parameter of in_chunks(command, key, values)


def lua_sources() -> dict[str, str]:
    """Every script and each file of the library, by file name (``enqueue.lua``, ``lib/claim.lua``)."""
    folder = resources.files("taskforge.broker").joinpath("lua")
    return {
        entry.name: entry.read_text(encoding="utf-8") for entry in folder.iterdir() if entry.name.endswith(".lua")
    } | {f"lib/{name}": text for name, text in library_files().items()}


def script_commands(sources: dict[str, str] | None = None) -> set[str]:
    """The commands the scripts can run, lower case; raises if one is named by a variable we cannot follow."""
    found: set[str] = set()
    for name, text in (sources if sources is not None else lua_sources()).items():
        code = "\n".join(line.split("--", 1)[0] for line in text.splitlines())
        found |= {match.lower() for match in _LITERAL_CALL.findall(code)}
        unknown = {m for m in _VARIABLE_CALL.findall(code) if m not in _DYNAMIC_OK}
        if unknown:
            raise ValueError(f"{name}: redis.call with a command held in {sorted(unknown)}: name it literally")
    return found


def commands() -> list[str]:
    """Every command a taskforge user runs, scripts and client together, sorted."""
    return sorted(script_commands() | set(CLIENT_COMMANDS))


def acl_rules() -> list[str]:
    """The rules after user name and password: keys, no channels, nothing but the commands."""
    return [KEY_PATTERN, "resetchannels", "-@all", *(f"+{c}" for c in commands())]


def acl_line() -> str:
    """The documented line (``docs/reference/acl.md``): ``ACL SETUSER taskforge on >PASSWORD`` and the rules."""
    return " ".join([USER_PREFIX, *acl_rules()])


if __name__ == "__main__":  # pragma: no cover - a one-line printer
    print(acl_line())
