"""What differs between the Redis and Valkey versions taskforge runs on, kept in one place.

Supported: Redis 6.2 and later, and every Valkey (all report 7.2 or later).
Three kinds of difference matter:

- Blocking timeouts. Redis 6.x and 7.0.0-7.0.7 turn a timeout in seconds
  into whole milliseconds by truncation, so 0.001 s (read back as
  0.000999...) becomes 0, which means "block forever": the caller then
  hangs until its socket timeout. ``block_timeout`` never sends less
  than 2 ms, which every server reads as at least 1 ms.
- The minimum version. ``BLMOVE`` (``JobHandle.result()``) and ``HELLO``
  without arguments came with 6.2; an older server is refused at the
  first connection with a message naming both versions, rather than by a
  raw "unknown command" at the first ``result()``.
- The wording of an ACL denial inside a script, which changed in 7.0 and
  7.2 (Valkey 8 uses 7.2's; Valkey 9 drops the script's sha).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any

import redis

from ..errors import ConfigurationError

# Every server reads 0.002 s as at least 1 ms; 0.001 s is 0 ms ("forever") on some.
MIN_BLOCK_TIMEOUT = 0.002
MINIMUM = (6, 2, 0)
MINIMUM_TEXT = "Redis 6.2 (or any Valkey)"


def block_timeout(seconds: float) -> float:
    """The timeout to send with BLPOP/BLMOVE for a wait of ``seconds``: never 0 ms on the server.

    Anything below the floor (zero, negative, a rounding leftover of a
    deadline just passed) would risk a server blocking until the socket
    timeout; the floor costs at most a couple of milliseconds.
    """
    return seconds if seconds >= MIN_BLOCK_TIMEOUT else MIN_BLOCK_TIMEOUT


# A server times a blocked client out on its cron tick (every 100 ms at the default hz 10),
# so a blocking wait shorter than a tick ends up to a tick late.
SERVER_TICK = 0.1


def wait_for_list(client: Any, key: str, timeout: float) -> bool:
    """Whether list ``key`` exists within ``timeout`` s; it is left as it was (BLMOVE to itself).

    A wait shorter than a server tick is a local sleep and one look: as a
    blocking command it would last a whole tick (``result(timeout=0.001)``
    took 100 ms on every server).
    """
    if timeout < SERVER_TICK:
        time.sleep(max(timeout, 0.0))
        return bool(client.exists(key))
    if type(client).__module__.startswith("fakeredis"):
        # fakeredis answers BLMOVE at once instead of blocking (a waiter would spin on
        # memory://); its BRPOPLPUSH, the same move under its older name, does block.
        return client.brpoplpush(key, key, timeout=block_timeout(timeout)) is not None
    return client.blmove(key, key, timeout=block_timeout(timeout), src="RIGHT", dest="LEFT") is not None


@dataclass(frozen=True)
class Server:
    """A server's name ("redis", "valkey") and version, as its HELLO reply gives them."""

    name: str
    version: tuple[int, ...]

    @property
    def text(self) -> str:
        return f"{self.name} {'.'.join(map(str, self.version))}"


def parse_version(text: str) -> tuple[int, ...]:
    """``"7.0.15"`` -> ``(7, 0, 15)``; a suffix such as ``-rc1`` is ignored."""
    numbers = re.match(r"(\d+)(?:\.(\d+))?(?:\.(\d+))?", text.strip())
    if numbers is None:
        raise ValueError(f"not a server version: {text!r}")
    return tuple(int(n) for n in numbers.groups() if n is not None)


def server_from_hello(reply: Any) -> Server:
    """Read the server out of a HELLO reply: a map under RESP3, a flat list under RESP2."""
    if isinstance(reply, list):
        reply = dict(zip(reply[::2], reply[1::2], strict=True))
    fields = {_text(k): v for k, v in reply.items()}
    return Server(_text(fields.get("server", "redis")), parse_version(_text(fields["version"])))


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def too_old(server: Server, shown_url: str) -> ConfigurationError | None:
    """The error for a server below the minimum, or None for a supported one.

    Only Redis and Valkey version numbers are compared: other servers that
    speak the protocol number their own releases (the embedded development
    broker answers "fakeredis 2.41.0").
    """
    if server.name not in ("redis", "valkey") or server.version >= MINIMUM:
        return None
    return ConfigurationError(
        f"the broker at {shown_url} runs {server.text}; taskforge needs {MINIMUM_TEXT} or later "
        "(it uses BLMOVE, which older servers lack)"
    )


def hello_error(reply: Any, shown_url: str) -> ConfigurationError | None:
    """What a HELLO reply (or its refusal, a ``ResponseError``) says against using this server."""
    if isinstance(reply, redis.ResponseError):
        return ConfigurationError(
            f"the broker at {shown_url} answered HELLO with {reply!s}: a server older than 6.0; "
            f"taskforge needs {MINIMUM_TEXT} or later"
        )
    return too_old(server_from_hello(reply), shown_url)


# -- errors -----------------------------------------------------------------

_UNKNOWN_COMMAND = re.compile(r"unknown command [`'](?P<command>[^`']+)[`']", re.IGNORECASE)


def unknown_command(message: str) -> str | None:
    """The command a server said it does not know (6.2 quotes it with backticks, 7.0+ with quotes)."""
    match = _UNKNOWN_COMMAND.search(message)
    return match["command"].lower() if match else None


@dataclass(frozen=True)
class ScriptDenial:
    """An ACL denial inside a script: the script line, and the command when the server names it."""

    line: int
    command: str | None


# What each server says when an ACL denies a command a script runs, newest first.
_DENIED_IN_SCRIPT = (
    # Redis 7.2+ and Valkey 8: "ACL failure in script: User taskforge has no permissions to run the
    # 'zpopmin' command script: <sha>, on @user_script:12."  Valkey 9: "... command script: on @user_script:12."
    re.compile(
        r"ACL failure in script: .*? has no permissions to run the '(?P<command>[^']+)' command"
        r" script: (?:\S+, )?on @user_script:(?P<line>\d+)"
    ),
    # Redis 7.0: "The user executing the script can't run this command or subcommand script: <sha>, on @user_script:12."
    re.compile(r"can't run this command or subcommand script: (?:\S+, )?on @user_script:(?P<line>\d+)"),
    # Redis 6.2: "Error running script (call to f_<sha>): @user_script:12: @user_script: 12: The user executing
    # the script can't run this command or subcommand"
    re.compile(r"@user_script:(?P<line>\d+): .*?can't run this command or subcommand"),
)


def script_denial(message: str) -> ScriptDenial | None:
    """Recognise an ACL denial inside a script in any supported server's wording."""
    for wording in _DENIED_IN_SCRIPT:
        match = wording.search(message)
        if match is not None:
            groups = match.groupdict()
            return ScriptDenial(int(groups["line"]), groups.get("command"))
    return None


_CALL = re.compile(r"redis\.p?call\('([A-Za-z]+)'")


def describe_script_denial(script: str, message: str, source: str) -> str | None:
    """For an ACL denial inside ``script`` (whose text is ``source``): which command was denied.

    Before 7.2 the server names only the script's line, so the command is
    read off that line of the source.
    """
    denial = script_denial(message)
    if denial is None:
        return None
    command = denial.command
    lines = source.splitlines()
    if command is None and 0 < denial.line <= len(lines):
        call = _CALL.search(lines[denial.line - 1])
        command = call.group(1).lower() if call else None
    what = f"'{command}'" if command else "a command"
    return f"the user may not run {what}, which taskforge's {script} script runs (line {denial.line})"
