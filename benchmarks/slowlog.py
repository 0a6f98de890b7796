"""The longest single Redis call of each big operation, from ``SLOWLOG``.

Starts a private ``redis-server`` on a free loopback port, sets
``slowlog-log-slower-than`` to a low threshold (5 ms by default), and for
each operation resets the ``SLOWLOG``, runs it, and prints the longest call
it logged with its command: every other client waits that long, so the
budget is 50 ms whatever the caller sends (docs/reference/options.md).

- ``delay_many`` of N jobs (1,000,000 by default) and ``adelay_many`` of N/10;
- a group of G members (100,000) and a chord of G members;
- ``taskforge dead retry --all`` and a bulk retry by filter of G dead jobs
  (made dead cheaply: records rewritten by a pipeline, no worker);
- ``taskforge purge`` of what the queue holds then;
- with ``--chain N``, a chain of N steps (its send: the record staged in
  pieces and committed);
- with ``--run-chord``, a chord of G members run to its body in this
  process (``app.drain``): the last member's report and the body's send.

Run from the repository root:

    python benchmarks/slowlog.py [--jobs 1000000] [--members 100000] [--threshold-ms 5]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from lua_calls import start_server  # noqa: E402
from soak import free_port  # noqa: E402

from taskforge import TaskForge, chain, chord, group  # noqa: E402
from taskforge.broker.keys import QueueKeys  # noqa: E402
from taskforge.broker.scripts import SCRIPT_NAMES, script_source  # noqa: E402

QUEUE = "slowlog"
BUDGET_MS = 50  # docs/reference/options.md: no single Redis call takes longer


def make_app(url: str) -> TaskForge:
    app = TaskForge("slowlog", url)

    @app.task(name="noop", queue=QUEUE)
    def noop(i: int = 0) -> int:
        return i

    @app.task(name="total", queue=QUEUE)
    def total(values: list[int]) -> int:
        return sum(values)

    return app


def longest(client: redis.Redis) -> tuple[float, str, int, int]:
    """The longest call logged since the reset: (ms, command, calls logged, calls over BUDGET_MS)."""
    entries: list[dict[str, Any]] = client.slowlog_get(100_000)  # type: ignore[assignment]
    if not entries:
        return 0.0, "(none over the threshold)", 0, 0
    top = max(entries, key=lambda e: e["duration"])
    command = top["command"]
    text = command.decode(errors="replace") if isinstance(command, bytes) else str(command)
    over = sum(1 for e in entries if e["duration"] > BUDGET_MS * 1000)
    return top["duration"] / 1000, shown(text), len(entries), over


def shown(command: str) -> str:
    """The command, each word cut to 40 characters and the whole to 6 words: an EVALSHA shows
    its script's SHA, its key and its first arguments (the enqueue's mode, say)."""
    words = command.split(" ")
    if words[0] == "EVALSHA":
        names = {source_sha(name): name for name in SCRIPT_NAMES}
        words[1] = names.get(words[1], words[1][:8])
    return " ".join(word[:40] for word in words[:7])


def source_sha(name: str) -> str:
    return hashlib.sha1(script_source(name).encode()).hexdigest()


def cpu_and_calls(client: redis.Redis) -> tuple[float, int]:
    """Redis's main-thread CPU seconds so far, and the script calls it served (``INFO``)."""
    cpu: dict[str, Any] = client.info("cpu")  # type: ignore[assignment]
    stats: dict[str, Any] = client.info("commandstats")  # type: ignore[assignment]
    calls = sum(int(stats.get(f"cmdstat_{name}", {}).get("calls", 0)) for name in ("evalsha", "eval"))
    return float(cpu["used_cpu_user_main_thread"]) + float(cpu["used_cpu_sys_main_thread"]), calls


def measure(client: redis.Redis, name: str, run: Callable[[], object]) -> None:
    """Run one operation; print its longest call (SLOWLOG, wall-clock: on a loaded machine it counts
    the time Redis waited for a CPU too) and the Redis CPU time per script call, on average."""
    client.slowlog_reset()
    cpu0, calls0 = cpu_and_calls(client)
    started = time.perf_counter()
    run()
    took = time.perf_counter() - started
    cpu1, calls1 = cpu_and_calls(client)
    per_call = (cpu1 - cpu0) * 1000 / max(1, calls1 - calls0)
    ms, command, logged, over = longest(client)
    print(
        f"{name:<34} {took:6.1f} s  longest {ms:7.2f} ms  ({logged} calls over the threshold, {over} over "
        f"{BUDGET_MS} ms; {calls1 - calls0} script calls, Redis CPU {per_call:.2f} ms per call)  {command}",
        flush=True,
    )


# Setup, not measured: pending jobs made dead as the fail script leaves them
# (state, the dead set, the search index's 'd' entry), 1,000 per call.
KILL = """
local prefix = ARGV[1]
for i = 2, #ARGV do
  local id = ARGV[i]
  local jk = prefix .. 'job:' .. id
  redis.call('ZREM', KEYS[1], id)
  redis.call('ZADD', prefix .. 'dead', i, id)
  redis.call('HSET', jk, 'state', 'dead', 'error', 'made dead')
  local created = redis.call('HGET', jk, 'created_at')
  redis.call('ZADD', prefix .. 'index', 0, 'd' .. string.format('%013d', tonumber(created)) .. #id .. ':' .. id)
end
"""


def kill_all(client: redis.Redis, queue: str) -> int:
    """Every pending job of ``queue`` dead (setup: the SLOWLOG is reset after it)."""
    q = QueueKeys(queue)
    ids = [i.decode() for i in client.zrange(q.pending, 0, -1)]
    kill = client.register_script(KILL)
    for start in range(0, len(ids), 1_000):
        kill(keys=[q.pending], args=[q.prefix, *ids[start : start + 1_000]])
    return len(ids)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--members", type=int, default=100_000)
    parser.add_argument("--threshold-ms", type=float, default=5.0)
    parser.add_argument("--server", default="redis-server")
    parser.add_argument(
        "--nice", type=int, default=0, help="the server's niceness (negative: ahead of a loaded machine's others)"
    )
    parser.add_argument("--chain", type=int, default=0, help="also send a chain of this many steps")
    parser.add_argument(
        "--run-chord", action="store_true", help="also run a chord's members in this process (app.drain) to its body"
    )
    args = parser.parse_args()
    port = free_port()
    proc = start_server(args.server, port)
    if args.nice:  # SLOWLOG times are wall-clock: on a loaded machine, time the server spent descheduled
        os.setpriority(os.PRIO_PROCESS, proc.pid, args.nice)
    url = f"redis://127.0.0.1:{port}/0"
    try:
        client = redis.Redis(port=port)
        client.config_set("slowlog-log-slower-than", int(args.threshold_ms * 1000))
        client.config_set("slowlog-max-len", 100_000)
        print(f"redis {client.info()['redis_version']}, SLOWLOG threshold {args.threshold_ms} ms", flush=True)
        app = make_app(url)
        noop, total = app.tasks["noop"], app.tasks["total"]
        calls = [(i,) for i in range(args.jobs)]
        measure(client, f"delay_many({args.jobs:,})", lambda: noop.delay_many(calls))
        few = calls[: max(1, args.jobs // 10)]
        measure(client, f"adelay_many({len(few):,})", lambda: asyncio.run(noop.adelay_many(few)))
        client.flushdb()
        members = args.members
        measure(client, f"group of {members:,}", lambda: group(noop.s(i) for i in range(members)).delay())
        client.flushdb()
        measure(client, f"chord of {members:,}", lambda: chord((noop.s(i) for i in range(members)), total.s()).delay())
        if args.chain:
            client.flushdb()
            steps = args.chain
            measure(client, f"chain of {steps:,}", lambda: chain(*(noop.si(i) for i in range(steps))).delay())
        if args.run_chord:
            client.flushdb()
            h = chord((noop.s(i) for i in range(members)), total.s()).delay()
            measure(client, f"chord of {members:,} run to its body", lambda: app.drain(max_jobs=members + 1))
            assert h.result(timeout=60) == members * (members - 1) // 2
        client.flushdb()
        noop.delay_many(calls[:members])
        kill_all(client, QUEUE)
        from taskforge.cli.dead import retry_every

        measure(client, f"dead retry --all ({members:,})", lambda: retry_every(app, [QUEUE]))
        kill_all(client, QUEUE)
        from taskforge import bulk
        from taskforge.search import query

        measure(
            client, f"bulk retry by filter ({members:,})", lambda: bulk.apply(app, query(app, state="dead"), "retry")
        )
        measure(client, f"purge pending ({members:,})", lambda: app.broker.cleanup.purge(QUEUE, "pending"))
    finally:
        proc.terminate()
        proc.wait()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
