"""Redis time per Lua script of taskforge, from the slow log of the harness's Redis (issue #15).

An untimed pass of its own: enqueue N jobs, drain them, with
``slowlog-log-slower-than 0`` so that Redis logs every command with the
microseconds it spent executing it (its own time, without the round trip
or the parsing of the request). Each ``EVALSHA`` entry carries the script's
sha; the peer's venv says which script each sha is (``script_shas``). The
previous slow-log settings are restored afterwards.

Why the slow log and not ``INFO commandstats``: commandstats sums every
``EVALSHA`` into one line, whatever the script; the slow log keeps each call
with its sha, so medians and p99 per script come out. MONITOR is not running
during this pass: it would slow every command down, Lua's included.
"""

from __future__ import annotations

import json
import statistics
import subprocess
from typing import Any

from .peers import Peer
from .resp import Redis

SLOWLOG_LEN = 1_000_000

# Run in the peer's venv: sha1 of each script exactly as taskforge sends it.
SHA_CODE = """
import hashlib, json
from importlib import resources
try:
    from taskforge.broker.scripts import SCRIPT_NAMES, script_source
    texts = {name: script_source(name) for name in SCRIPT_NAMES}
except ImportError:  # another layout: the .lua files as they are
    lua = resources.files("taskforge.broker").joinpath("lua")
    texts = {p.name[:-4]: p.read_text() for p in lua.iterdir() if p.name.endswith(".lua")}
print(json.dumps({hashlib.sha1(t.encode()).hexdigest(): n for n, t in texts.items()}))
"""


def script_shas(peer: Peer) -> dict[str, str]:
    """sha1 -> script name, computed by the taskforge installed in the peer's venv."""
    proc = subprocess.run([str(peer.python), "-c", SHA_CODE], capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        raise RuntimeError(f"cannot list taskforge's scripts: {proc.stderr.strip()[-300:]}")
    return json.loads(proc.stdout)


class SlowLog:
    """Every command logged while the ``with`` block runs; the old settings come back afterwards."""

    def __init__(self, redis: Redis) -> None:
        self.redis = redis
        self.saved: dict[str, str] = {}
        self.entries: list[Any] = []

    def __enter__(self) -> SlowLog:
        for key in ("slowlog-log-slower-than", "slowlog-max-len"):
            reply = self.redis.call("CONFIG", "GET", key)
            self.saved[key] = reply[1].decode()  # type: ignore[index]
        self.redis.call("CONFIG", "SET", "slowlog-max-len", SLOWLOG_LEN)
        self.redis.call("CONFIG", "SET", "slowlog-log-slower-than", 0)
        self.redis.call("SLOWLOG", "RESET")
        return self

    def __exit__(self, *exc: object) -> None:
        self.redis.call("CONFIG", "SET", "slowlog-log-slower-than", self.saved["slowlog-log-slower-than"])
        self.entries = self.redis.call("SLOWLOG", "GET", -1)  # type: ignore[assignment]
        self.redis.call("SLOWLOG", "RESET")
        self.redis.call("CONFIG", "SET", "slowlog-max-len", self.saved["slowlog-max-len"])


def per_script(entries: list[Any], shas: dict[str, str], jobs: int) -> dict[str, dict[str, float]]:
    """Script name -> calls, calls per job, median / p99 / mean µs per call, µs per job."""
    times: dict[str, list[int]] = {}
    for entry in entries:
        duration, args = int(entry[2]), entry[3]
        if len(args) < 2 or args[0].upper() not in (b"EVALSHA", b"EVALSHA_RO"):
            continue
        sha = args[1].decode()
        times.setdefault(shas.get(sha, f"sha {sha[:8]}"), []).append(duration)
    out = {}
    for name, values in sorted(times.items(), key=lambda kv: -sum(kv[1])):
        ordered = sorted(values)
        out[name] = {
            "calls": len(values),
            "calls_per_job": round(len(values) / jobs, 3),
            "median_us": statistics.median(values),
            "p99_us": ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))],
            "mean_us": round(statistics.fmean(values), 1),
            "us_per_job": round(sum(values) / jobs, 1),
        }
    return out


def table(data: dict[str, dict[str, float]]) -> list[str]:
    rows = [
        "| script | calls | calls per job | µs per call, median | p99 | mean | µs per job |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, d in data.items():
        rows.append(
            f"| {name} | {d['calls']:,} | {d['calls_per_job']:.2f} | {d['median_us']:g} | {d['p99_us']:g} | "
            f"{d['mean_us']:g} | {d['us_per_job']:g} |"
        )
    total = sum(d["us_per_job"] for d in data.values())
    rows.append(f"| all scripts | | | | | | {total:.1f} |")
    return rows
