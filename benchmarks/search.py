"""Finding jobs among a million, and a bulk retry of 100,000 dead ones, on a private Redis.

1. Fills a private ``redis-server`` with ``--jobs`` finished jobs through the
   queue's own scripts, in bulk (``delay_many`` of 5,000, claims of 500 and
   ``settle``; the dead through ``fail``, the cancelled through ``cancel``):
   four tasks, one keyed by customer over ``--keys`` customers, every job's
   arguments holding a customer's e-mail address; 94% succeed, 5% die, 1%
   are cancelled.
2. Times a page of 50 (``--queries`` pages per kind, each with another
   value: p50 and p95 in ms) from ``app.find_jobs`` and from the dashboard's
   ``/api/jobs`` (its own process): by task, by state (dead; succeeded; every
   job), by key, by text (a customer's address, which 1 job in ``--keys``
   holds), a page deep in (the 10th, through cursors), and a text no job
   holds (a page that stops at its budget).
3. Fills ``--bulk`` dead jobs into a queue of their own, sets the slow log to
   record every call over 10 ms, and retries them all with ``taskforge
   jobs --state dead --retry --yes`` (a real process): the time, the slow
   log's entries, and that every job is back in the queue exactly once
   (pending, attempts 0, the dead set empty; a second run changes nothing).

The hot path's cost of the index is ``drain_cpu.py --base <tree before>``
and ``run.py --quick`` (see docs/performance.md).

    python benchmarks/search.py [--jobs 1000000] [--keys 10000] [--queries 20] [--bulk 100000]
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from drain_cpu import free_port, start_redis  # noqa: E402

BATCH = 5_000
CLAIM = 500
PAGE = 50


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def fill(app: Any, tasks: Any, jobs: int, keys: int, queue: str = "default") -> dict[str, int]:
    """``jobs`` finished jobs through the scripts: returns how many ended each way."""
    from taskforge.serialization import dumps_result

    charge, receipt, sync, report = tasks
    ended = {"succeeded": 0, "dead": 0, "cancelled": 0}
    rng = random.Random(7)
    made = 0
    while made < jobs:
        n = min(BATCH, jobs - made)
        customers = [rng.randrange(keys) for _ in range(n)]
        kinds = [(made + i) % 4 for i in range(n)]
        groups: dict[int, list[Any]] = {0: [], 1: [], 2: [], 3: []}
        for i, (c, kind) in enumerate(zip(customers, kinds, strict=True)):
            groups[kind].append((f"customer-{c}@example.com", made + i))
        charge.delay_many(groups[0])
        receipt.delay_many(groups[1])
        sync.delay_many([(f"sku-{o}", o % 97) for _, o in groups[2]])
        report.delay_many([(f"2026-12-{o % 28 + 1:02d}", o) for _, o in groups[3]])
        made += n
        while True:
            claims, _ = app.broker.claims.dequeue(queue, 600_000, count=CLAIM)
            if not claims:
                break
            wins = []
            for claim in claims:
                roll = rng.random()
                if roll < 0.05:
                    who = claim.args[0] if isinstance(claim.args[0], str) else "nobody"
                    error = f"PaymentError: card declined for {who}"
                    app.broker.claims.fail(queue, claim.id, claim.token, error, error + "\n", None)
                    ended["dead"] += 1
                elif roll < 0.06:
                    app.broker.claims.requeue(queue, claim.id, claim.token)
                    app.broker.jobs.cancel(queue, claim.id)
                    ended["cancelled"] += 1
                else:
                    wins.append((claim.id, claim.token, dumps_result(None)))
            app.broker.claims.settle(queue, wins)
            ended["succeeded"] += len(wins)
        print(f"\r  filled {made:,} of {jobs:,}", end="", flush=True)
    print()
    return ended


def timed(call: Callable[[], Any], runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        began = time.perf_counter()
        call()
        times.append((time.perf_counter() - began) * 1000)
    return times


def get(url: str) -> dict[str, Any]:
    import json

    with urllib.request.urlopen(url, timeout=60) as response:
        assert response.status == 200, (url, response.status)
        return json.loads(response.read())  # type: ignore[no-any-return]


def deep(find: Callable[..., Any], pages: int, **filters: Any) -> None:
    cursor = None
    for _ in range(pages):
        cursor = find(cursor=cursor, **filters)
        if cursor is None:
            return


def kinds(keys: int, tasks: Any, rng: random.Random) -> list[tuple[str, Callable[[], dict[str, Any]]]]:
    names = [t.name for t in tasks]
    return [
        ("by task", lambda: {"task": rng.choice(names)}),
        ("by state: dead", lambda: {"state": "dead"}),
        ("by state: succeeded", lambda: {"state": "succeeded"}),
        ("by key", lambda: {"key": f"customer-{rng.randrange(keys)}@example.com"}),
        ("by text (a customer)", lambda: {"match": f"customer-{rng.randrange(keys)}@example.com"}),
        ("by text (a word of the dead)", lambda: {"match": "declined"}),
        ("task + state dead", lambda: {"task": names[0], "state": "dead"}),
        ("every job", lambda: {}),
    ]


def row(label: str, here: list[float], there: list[float] | None, jobs: str) -> None:
    served = f"{statistics.median(there):.1f} | {percentile(there, 0.95):.1f}" if there else "- | -"
    print(f"| {label} | {statistics.median(here):.1f} | {percentile(here, 0.95):.1f} | {served} | {jobs} |")


def one_kind(
    app: Any, base: str, make: Callable[[], dict[str, Any]], runs: int
) -> tuple[list[float], list[float], int]:
    sizes: list[int] = []

    def library() -> None:
        sizes.append(len(app.find_jobs(limit=PAGE, **make()).jobs))

    def web() -> None:
        get(f"{base}/api/jobs?{urllib.parse.urlencode({**make(), 'limit': PAGE})}")

    return timed(library, runs), timed(web, runs), int(statistics.median(sizes))


def measure(app: Any, base: str, keys: int, tasks: Any, runs: int) -> None:
    rng = random.Random(11)
    print(f"\n| page of {PAGE} | find_jobs p50 ms | p95 ms | dashboard /api/jobs p50 ms | p95 ms | jobs on the page |")
    print("|---|---|---|---|---|---|")
    for label, make in kinds(keys, tasks, rng):
        here, there, size = one_kind(app, base, make, runs)
        row(label, here, there, str(size))

    def tenth() -> None:
        deep(lambda cursor, **f: app.find_jobs(limit=PAGE, cursor=cursor, **f).cursor, 10, task=tasks[0].name)

    row("10 pages by task, through cursors", timed(tenth, max(3, runs // 4)), None, "500")
    miss = timed(lambda: app.find_jobs(limit=PAGE, match="no job holds this text"), max(3, runs // 4))
    row("a text no job holds (stops at its budget)", miss, None, "0")
    needle = f"customer-{rng.randrange(keys)}@example.com"
    began, pages, found, cursor = time.perf_counter(), 0, 0, None
    while True:
        page = app.find_jobs(limit=PAGE, match=needle, cursor=cursor)
        pages, found, cursor = pages + 1, found + len(page.jobs), page.cursor
        if cursor is None:
            break
    print(
        f"\na rare text followed to the end ({needle}, in 1 job of {keys:,}): {found} jobs over {pages} pages"
        f" in {time.perf_counter() - began:.1f} s, every job looked at once"
    )


def package_root() -> str:
    """Where this process's ``taskforge`` comes from: the dashboard and the CLI it starts run the same one."""
    import taskforge

    return str(Path(taskforge.__file__).resolve().parent.parent)


def dashboard(url: str) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    env = {**os.environ, "TASKFORGE_BROKER_URL": url, "PYTHONPATH": os.pathsep.join([str(HERE), package_root()])}
    board = subprocess.Popen(
        [sys.executable, "-m", "taskforge", "dashboard", "search_app:app", "--port", str(port)],
        cwd=HERE,
        env=env,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return board, f"http://127.0.0.1:{port}"
        except OSError:
            if time.monotonic() > deadline or board.poll() is not None:
                raise SystemExit("the dashboard did not start") from None
            time.sleep(0.1)


def bulk_retry(app: Any, url: str, dead: int) -> None:
    from search_app import send_receipt

    client = redis.Redis.from_url(url)
    queue = "bulk"
    task = send_receipt.with_options(queue=queue, max_attempts=1)
    for first in range(0, dead, BATCH):
        task.delay_many([(f"customer-{n}@example.com", n) for n in range(first, min(dead, first + BATCH))])
        while claims := app.broker.claims.dequeue(queue, 600_000, count=CLAIM)[0]:
            pipe_calls = [(c.id, c.token) for c in claims]
            for job_id, token in pipe_calls:
                app.broker.claims.fail(queue, job_id, token, "SMTPError: relay down", "", None)
    counts = app.broker.inspection.counts(queue)
    assert counts["dead"] == dead, counts
    client.config_set("slowlog-log-slower-than", 1_000)  # every call over 1 ms, to see how far from 10 ms
    client.config_set("slowlog-max-len", 100_000)
    client.slowlog_reset()
    env = {**os.environ, "TASKFORGE_BROKER_URL": url, "PYTHONPATH": os.pathsep.join([str(HERE), package_root()])}
    command = [sys.executable, "-m", "taskforge", "jobs", "search_app:app", "--queue", queue, "--state", "dead"]
    began = time.perf_counter()
    out = subprocess.run([*command, "--retry", "--yes"], cwd=HERE, env=env, capture_output=True, text=True, check=True)
    seconds = time.perf_counter() - began
    logged = client.slowlog_get(100_000)
    slow = [entry for entry in logged if entry["duration"] > 10_000]
    again = subprocess.run(
        [*command, "--retry", "--yes"], cwd=HERE, env=env, capture_output=True, text=True, check=True
    )
    counts = app.broker.inspection.counts(queue)
    pending = [m.decode() for m in client.zrange(f"taskforge:{{{queue}}}:pending", 0, -1)]
    pipe = client.pipeline(transaction=False)
    for job_id in pending:
        pipe.hmget(f"taskforge:{{{queue}}}:job:{job_id}", "state", "attempts")
    rows = pipe.execute()
    back = sum(1 for state, attempts in rows if state == b"pending" and attempts == b"0")
    worst = max((entry["duration"] for entry in slow), default=0) / 1000
    print(f"\nbulk retry of {dead:,} dead jobs (`taskforge jobs --state dead --retry --yes`): {seconds:.1f} s")
    print(f"  it said: {out.stdout.strip()!r}; run again: {again.stdout.strip()!r}")
    over = {ms: sum(1 for e in logged if e["duration"] > ms * 1000) for ms in (1, 2, 5)}
    longest = max((e["duration"] for e in logged), default=0) / 1000
    print(
        f"  slow log entries over 10 ms: {len(slow)} (longest {worst:.1f} ms); over 1 ms: {over[1]},"
        f" over 2 ms: {over[2]}, over 5 ms: {over[5]}; the longest call of all: {longest:.1f} ms"
    )
    names = {script.sha: name for name, script in app.broker.scripts._scripts.items()}
    for entry in sorted(logged, key=lambda e: -e["duration"])[:5]:
        words = entry["command"].split()
        name = names.get(words[1].decode(), "?") if len(words) > 1 and words[0] == b"EVALSHA" else ""
        print(f"    {entry['duration'] / 1000:.1f} ms: {name} {entry['command'][:100]!r}")
    print(
        f"  after: {counts['pending']:,} pending, {counts['dead']} dead; {len(pending):,} distinct ids in the"
        f" pending set, {back:,} of them pending with attempts 0"
    )
    client.config_set("slowlog-log-slower-than", 10_000)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=20)
    parser.add_argument("--bulk", type=int, default=100_000)
    parser.add_argument("--redis-server", default="redis-server")
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory() as workdir:
        server, url = start_redis(opts.redis_server, workdir)
        os.environ["TASKFORGE_BROKER_URL"] = url
        try:
            from search_app import app, build_report, charge, send_receipt, sync_inventory

            tasks = (charge, send_receipt, sync_inventory, build_report)
            began = time.perf_counter()
            ended = fill(app, tasks, opts.jobs, opts.keys)
            client = redis.Redis.from_url(url)
            memory = client.info("memory")["used_memory"] / 2**20
            index = client.memory_usage("taskforge:{default}:index") or 0
            entries = client.zcard("taskforge:{default}:index")
            print(
                f"filled {opts.jobs:,} finished jobs in {time.perf_counter() - began:.0f} s: {ended}; Redis uses"
                f" {memory:,.0f} MiB, the index {index / 2**20:,.0f} MiB ({entries:,} entries)"
            )
            board, base = dashboard(url)
            try:
                measure(app, base, opts.keys, tasks, opts.queries)
            finally:
                board.send_signal(signal.SIGTERM)
                board.wait(timeout=15)
            if opts.bulk:
                bulk_retry(app, url, opts.bulk)
        finally:
            server.terminate()
            server.wait(timeout=30)


if __name__ == "__main__":
    main()
