"""Which processes a worker is, recorded so another worker on the same machine can prove them gone.

A worker killed with ``kill -9`` leaves its claims to expire: 60 s by
default. A worker starting on the same machine can do better, but only when
the dead worker's processes provably no longer exist; a claim taken from a
live worker runs its job twice. The proof is local and needs three facts:

* the same kernel boot (``/proc/sys/kernel/random/boot_id``): a pid from
  before a reboot says nothing about the processes of today;
* the same pid namespace (``/proc/self/ns/pid``): containers that share a
  hostname each have their own pids, and a pid seen from one says nothing
  about another;
* for each recorded process, its pid with its start time (field 22 of
  ``/proc/PID/stat``, in clock ticks since boot): a pid reused by a new
  process has another start time.

Where a fact cannot be read (no ``/proc``, a restricted container), nothing
is proved and the claims wait out their lease as before.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterable, Mapping
from typing import Any

BOOT_ID = "/proc/sys/kernel/random/boot_id"


def read_text(path: str) -> str:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return ""


def boot_id() -> str:
    return read_text(BOOT_ID)


def pid_namespace() -> str:
    """``pid:[4026531836]``, or "" where it cannot be read."""
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return ""


def start_time(pid: int) -> int | None:
    """When process ``pid`` started, in clock ticks since boot; None when no such process exists."""
    raw = read_text(f"/proc/{pid}/stat")
    if not raw:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after its last ')'.
    fields = raw[raw.rfind(")") + 2 :].split()
    if not fields or fields[0] in ("Z", "X"):  # a zombie runs no code: it is gone, only not yet reaped
        return None
    try:
        return int(fields[19])  # field 22 of the whole line
    except (IndexError, ValueError):
        return None


def process(pid: int) -> list[int]:
    """``[pid, start time]`` as a worker records it (start time 0 when unreadable: never proved gone)."""
    return [pid, start_time(pid) or 0]


def here() -> dict[str, str]:
    """This machine's facts, as a worker records them beside its own pid."""
    return {"host": socket.gethostname(), "boot": boot_id(), "pidns": pid_namespace()}


def provably_gone(entry: Mapping[str, Any], facts: Mapping[str, str] | None = None) -> bool:
    """True when every process the worker ``entry`` recorded no longer exists, seen from here.

    ``entry`` is a worker's listing (``broker.workers.decode``): its host,
    boot id, pid namespace and ``processes`` ([pid, start time] pairs, the
    supervisor first). False whenever anything is unknown or differs.
    """
    facts = facts if facts is not None else here()
    if not facts["boot"] or not facts["pidns"]:
        return False
    if (entry.get("host"), entry.get("boot"), entry.get("pidns")) != (facts["host"], facts["boot"], facts["pidns"]):
        return False
    recorded: Iterable[Any] = entry.get("processes") or []
    pairs = [pair for pair in recorded if isinstance(pair, list) and len(pair) == 2 and type(pair[0]) is int]
    if not pairs or any(not isinstance(start, int) or start <= 0 for _, start in pairs):
        return False
    return all(start_time(int(pid)) != start for pid, start in pairs)
