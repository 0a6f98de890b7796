"""Side-by-side benchmark of taskforge and its peers on one local Redis (issue #6).

Run from anywhere, with any Python >= 3.10 (the harness uses the standard
library only; each library runs from its own venv under the cache dir):

    python3 benchmarks/run.py                      # everything: N=10,000, 3 rounds, every peer
    python3 benchmarks/run.py --quick              # < 3 min once the venvs exist (see below)
    python3 benchmarks/run.py --only taskforge,rq --runs 5 --n 20000

Workloads, on a no-op task whose side effect is an INCR in the counter db
(sent on a no-reply socket, the same code for every peer: peers/_common.py):
  W1  enqueue: one producer, N calls of the normal API; beside it the same
      process doing N bare redis-py SETs (the round-trip floor right now)
  W1b bulk: one bulk call of N jobs (taskforge delay_many, RQ enqueue_many)
  W2  drain: N jobs queued, start the worker, time until the counter is N
  W3  latency: idle worker, jobs one at a time; task start - enqueue start
  worker start: spawn to the start of the one job queued (median of --start-runs)
  and Redis commands per job, client and inside Lua (MONITOR on the queue db,
  one untimed pass, with --idle seconds of an idle worker), and taskforge's
  Redis time per script (slow log, one untimed pass of --script-n jobs).
  What each job costs Redis (issue #50), two untimed passes per library:
  memory, the used_memory delta per queued job and per finished job its
  default keeps (--mem-n jobs, with a breakdown by key kind), and Redis
  time per job's life, enqueue + claim + outcome, from INFO commandstats on
  a private redis-server the pass starts (--time-n jobs, --redis-server).

Every figure is the median of --runs rounds with min-max. Rounds are
interleaved (taskforge, huey, ..., then again), one library at a time, so
a slow moment of a shared machine spreads over everyone. Only ratios within
one run mean much on a shared machine.

--quick: N=1,000, 1 round, 100 latency jobs, 1 worker start, 5,000 jobs
for memory and Redis time, 300 jobs for
the command count of taskforge's two shapes only (a peer's count depends
only on its version: see RESULTS.md; with --only, every library named is
counted), 3 s idle, optional peers (arq) only if named in --only;
writes benchmarks/.cache/RESULTS-quick.md so it never replaces the full
RESULTS.md.

Output: progress on stderr; on stdout one JSON line per result (also saved
under benchmarks/.cache/), then the Markdown tables, also written to
benchmarks/RESULTS.md with the date, machine, versions and worker command lines.
Uses databases 8 (queues) and 9 (counters) of the Redis, and FLUSHDBs both;
sets slowlog-log-slower-than to 0 during the script pass, restored after.
Memory figures are used_memory deltas, server-wide: clean only when nothing
else writes to that Redis (give --redis a private server; the report counts
the other clients it saw).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import signal
import sys
import time
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
sys.path.insert(0, str(BENCH_DIR))

from harness import costs, processes, redis_time, venvs  # noqa: E402
from harness.document import markdown  # noqa: E402
from harness.peers import Peer, discover  # noqa: E402
from harness.report import Results  # noqa: E402
from harness.resp import Redis, RedisError  # noqa: E402
from harness.workloads import Bench, Settings, log  # noqa: E402

ORDER = ["taskforge", "taskforge_t1", "huey", "dramatiq", "saq", "celery", "rq", "arq"]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n".join(__doc__.splitlines()[2:]),
    )
    p.add_argument("--quick", action="store_true", help="small and fast: see below")
    p.add_argument("--only", help="comma-separated libraries, e.g. taskforge,huey")
    p.add_argument("--skip", help="comma-separated libraries to leave out")
    p.add_argument("--runs", type=int, help="rounds per library (default 3, quick 1; 0: only the untimed passes)")
    p.add_argument("--n", type=int, help="jobs for W1, W1b, W2 (default 10000, quick 1000)")
    p.add_argument("--latency-jobs", type=int, help="W3 jobs (default 300, quick 100)")
    p.add_argument("--cmd-n", type=int, help="jobs for the command count (default 2000, quick 300)")
    p.add_argument("--idle", type=float, help="seconds of idle worker in the command count (default 10, quick 3)")
    p.add_argument("--start-runs", type=int, help="worker starts timed per library (default 3, quick 1)")
    p.add_argument(
        "--script-n", type=int, help="jobs for taskforge's Redis time per script (default 2000, quick 300; 0: skip)"
    )
    p.add_argument(
        "--mem-n",
        type=int,
        help="jobs for Redis memory per queued and finished job (default 20000, quick 5000; 0: off)",
    )
    p.add_argument("--time-n", type=int, help="jobs for Redis time per job's life (default 20000, quick 5000; 0: skip)")
    p.add_argument(
        "--redis-server", default=redis_time.default_server(), help="binary of the private server of the time pass"
    )
    p.add_argument("--procs", type=int, default=2, help="worker processes per library (default 2)")
    p.add_argument("--redis", default="redis://127.0.0.1:6379", help="Redis, without a database")
    p.add_argument("--queue-db", type=int, default=8)
    p.add_argument("--counter-db", type=int, default=9)
    p.add_argument("--drain-timeout", type=float, default=120.0, help="a longer drain is a failure (s)")
    p.add_argument("--stop-grace", type=float, default=5.0, help="SIGTERM to SIGKILL of a worker (s)")
    p.add_argument(
        "--hiredis",
        choices=["yes", "no"],
        default="yes",
        help="install hiredis in every venv (default) or in none: redis-py parses replies with it when present",
    )
    p.add_argument(
        "--peer-redis-py",
        metavar="SPEC",
        help="pin redis-py in the peers' venvs (not taskforge's), e.g. 'redis==5.3.*'; default: what each resolves",
    )
    p.add_argument(
        "--side-effect",
        choices=["raw", "redis-py"],
        default="raw",
        help="how a task counts its completion: raw = no-reply socket (default), redis-py = INCR awaited",
    )
    p.add_argument("--cache", type=Path, default=BENCH_DIR / ".cache", help="venvs, logs, raw results")
    p.add_argument(
        "--taskforge-src",
        type=Path,
        default=REPO,
        help="the taskforge tree to install (default: this repo, as it is now)",
    )
    p.add_argument("--python", default=venvs.default_base_python(), help="interpreter the venvs are made from")
    p.add_argument("--out", type=Path, help="Markdown file (default RESULTS.md; quick: .cache/RESULTS-quick.md)")
    p.add_argument("--json", type=Path, help="JSON lines file (default .cache/results-<time>.jsonl)")
    opts = p.parse_args(argv)
    quick = opts.quick
    opts.runs = opts.runs if opts.runs is not None else (1 if quick else 3)
    opts.n = opts.n or (1000 if quick else 10000)
    opts.latency_jobs = opts.latency_jobs or (100 if quick else 300)
    opts.cmd_n = opts.cmd_n or (300 if quick else 2000)
    opts.idle = opts.idle if opts.idle is not None else (3.0 if quick else 10.0)
    opts.start_runs = opts.start_runs if opts.start_runs is not None else (1 if quick else 3)
    opts.script_n = opts.script_n if opts.script_n is not None else opts.cmd_n
    opts.mem_n = opts.mem_n if opts.mem_n is not None else (5000 if quick else 20000)
    opts.time_n = opts.time_n if opts.time_n is not None else (5000 if quick else 20000)
    opts.out = opts.out or (opts.cache / "RESULTS-quick.md" if quick else BENCH_DIR / "RESULTS.md")
    return opts


def select(peers: dict[str, Peer], opts: argparse.Namespace) -> list[Peer]:
    order = ORDER + sorted(set(peers) - set(ORDER))
    if opts.only:
        wanted = [name.strip() for name in opts.only.split(",") if name.strip()]
        unknown = [w for w in wanted if w not in peers]
        if unknown:
            sys.exit(f"--only: unknown {', '.join(unknown)}; known: {', '.join(sorted(peers))}")
        chosen = [name for name in order if name in wanted]
    else:
        chosen = [name for name in order if name in peers and not (opts.quick and peers[name].optional)]
    skip = {name.strip() for name in (opts.skip or "").split(",")}
    return [peers[name] for name in chosen if name not in skip]


def machine(settings: Settings) -> dict[str, Any]:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    server = Redis.from_url(settings.queue_url).info("server")
    return {
        "type": "machine",
        "cpu": cpu,
        "cores": os.cpu_count(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "os": f"{platform.system()} {platform.release()}",
        "harness_python": platform.python_version(),
        "redis_version": server.get("redis_version"),
        "redis": f"{settings.redis_url} (db {settings.queue_db} queues, db {settings.counter_db} counters)",
    }


def install(peers: list[Peer], opts: argparse.Namespace, fingerprint_box: dict[str, str]) -> None:
    logs = opts.cache / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    snapshot, fingerprint = venvs.snapshot_taskforge(opts.taskforge_src.resolve(), opts.cache)
    fingerprint_box["taskforge"] = fingerprint
    for peer in peers:
        extra = ["hiredis"] if opts.hiredis == "yes" else []
        if opts.peer_redis_py and not peer.local:
            extra.append(opts.peer_redis_py)
        peer.venv = peer.venv.with_name(peer.venv.name + venv_suffix(opts, peer.local))
        log(f"[install] {peer.name} -> {peer.venv}")
        try:
            force = fingerprint if peer.local else ""
            peer.python = venvs.ensure_venv(
                peer.venv,
                peer.requirements(snapshot, extra),
                opts.python,
                logs / f"pip-{peer.name}.log",
                force_key=force,
            )
            if opts.hiredis == "no":
                venvs.uninstall(peer.python, "hiredis", logs / f"pip-{peer.name}.log")
            wanted = [*peer.spec.get("distributions", []), "redis", "hiredis"]
            peer.versions = venvs.versions(peer.python, list(dict.fromkeys(wanted)))
        except venvs.InstallError as exc:
            peer.unavailable = f"cannot be installed: {exc}"
            log(f"[install] {peer.name}: {peer.unavailable}")


def venv_suffix(opts: argparse.Namespace, local: bool) -> str:
    """Venvs differ by client choice, so switching ``--hiredis`` back and forth reinstalls nothing."""
    suffix = "-nohiredis" if opts.hiredis == "no" else ""
    if opts.peer_redis_py and not local:
        suffix += "-" + "".join(c if c.isalnum() or c in ".-" else "_" for c in opts.peer_redis_py)
    return suffix


def describe(env: dict[str, Any], peers: list[Peer], opts: argparse.Namespace, settings: Settings) -> list[str]:
    """The machine and the libraries, for the top of the progress log."""
    lines = [
        f"machine: {env['cpu']}, {env['cores']} cores, load average {env['load_average']}, {env['os']}",
        f"redis {env['redis_version']} at {env['redis']}; harness python {env['harness_python']}; "
        f"taskforge source {env.get('taskforge_fingerprint')}",
    ]
    for peer in peers:
        if peer.unavailable:
            lines.append(f"  {peer.name:<10} UNAVAILABLE: {peer.unavailable}")
            continue
        versions = ", ".join(f"{k} {v}" for k, v in peer.versions.items())
        lines.append(f"  {peer.name:<10} {versions}; worker: {peer.worker_display(opts.procs, settings.queue_url)}")
    return lines


def run_all(bench: Bench, ready: list[Peer], opts: argparse.Namespace, results: Results) -> None:
    """The interleaved timed rounds, the worker starts, one command-count pass per library, script times."""
    for round_no in range(1, opts.runs + 1):
        for peer in ready:
            log(f"[round {round_no}/{opts.runs}] {peer.name}")
            try:
                metrics, errors = bench.timed_round(peer, opts.n, opts.latency_jobs, round_no)
            except Exception as exc:  # a harness bug or an OS error: report it, go on with the others
                metrics, errors = {}, [f"round {round_no}: {type(exc).__name__}: {exc}"]
            results.add_round(peer.name, metrics, errors)
            for err in errors:
                log(f"  {peer.name}: {err}")
            log("  " + ", ".join(f"{k} {v:,.2f}" for k, v in metrics.items()))
    untimed_passes(bench, ready, opts, results)


def untimed_passes(bench: Bench, ready: list[Peer], opts: argparse.Namespace, results: Results) -> None:
    """Worker starts, commands per job (MONITOR), taskforge's Redis time per script (slow log), then what
    each job costs Redis: memory per queued and finished job, Redis time per job's life (costs.py)."""
    for _ in range(opts.start_runs):
        for peer in ready:
            try:
                results.add_round(peer.name, {"worker_start_s": bench.worker_start(peer)}, [])
            except Exception as exc:
                results.add_round(peer.name, {}, [f"worker start: {type(exc).__name__}: {exc}"])
    for peer in ready:
        if opts.quick and not opts.only and not peer.name.startswith("taskforge"):
            continue  # --quick: the peers' counts depend only on their versions; see RESULTS.md
        log(f"[commands] {peer.name}")
        try:
            data, errors = bench.count_commands(peer, opts.cmd_n, opts.idle)
        except Exception as exc:
            data, errors = {}, [f"commands: {type(exc).__name__}: {exc}"]
        results.commands[peer.name] = data
        if errors:
            results.errors.setdefault(peer.name, []).extend(errors)
    for peer in ready:
        if peer.name == "taskforge" and opts.script_n > 0:
            log(f"[script times] {peer.name}")
            try:
                results.scripts = bench.script_times(peer, opts.script_n)
            except Exception as exc:
                results.errors.setdefault(peer.name, []).append(f"script times: {type(exc).__name__}: {exc}")
    costs.run(bench, ready, opts, results)


def on_signal(signum: int, _frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: list[str] | None = None) -> int:
    opts = parse_args(argv)
    began = time.monotonic()
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    opts.cache.mkdir(parents=True, exist_ok=True)
    registry = opts.cache / "live-workers.json"
    leftovers = processes.reap_leftovers(registry)
    if leftovers:
        log(f"killed worker groups left by an interrupted run: {leftovers}")
    settings = Settings(
        opts.redis.rstrip("/"),
        opts.queue_db,
        opts.counter_db,
        opts.procs,
        opts.drain_timeout,
        opts.stop_grace,
        BENCH_DIR,
        opts.cache,
        opts.side_effect,
    )
    try:
        env = machine(settings)
    except (OSError, RedisError) as exc:
        sys.exit(f"cannot reach Redis at {settings.redis_url}: {exc}")
    env["date"] = dt.datetime.now().astimezone().isoformat(timespec="seconds")
    peers = select(discover(BENCH_DIR / "peers", opts.cache / "venvs"), opts)
    fingerprint: dict[str, str] = {}
    results = Results(opts.runs, opts.n)
    try:
        install(peers, opts, fingerprint)
        ready = [p for p in peers if not p.unavailable]
        env["versions"] = {p.name: p.versions for p in peers}
        env["taskforge_fingerprint"] = fingerprint.get("taskforge")
        for line in describe(env, peers, opts, settings):
            log(line)
        run_all(Bench(settings), ready, opts, results)
    except KeyboardInterrupt:
        log("interrupted: stopping workers, writing what was measured")
    finally:
        processes.stop_all()
    env["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
    elapsed = time.monotonic() - began
    env["elapsed_s"] = round(elapsed, 1)
    targets = results.targets() if any(p.name.startswith("taskforge") for p in peers) else []
    targets += costs.targets(results)
    lines = [env, *results.json_lines(), *costs.json_lines(results), *targets]
    if results.scripts:
        lines.append({"type": "script_times", "peer": "taskforge", "n": opts.script_n, "scripts": results.scripts})
    lines += [{"type": "unavailable", "peer": p.name, "why": p.unavailable} for p in peers if p.unavailable]
    json_path = opts.json or opts.cache / f"results-{time.strftime('%Y%m%d-%H%M%S')}.jsonl"
    json_path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    for line in lines:
        print(json.dumps(line))
    argv_text = " ".join(sys.argv[1:] if argv is None else argv)
    doc = markdown(opts, argv_text, env, peers, results, settings, elapsed, fingerprint.get("taskforge", "-"), targets)
    opts.out.write_text(doc)
    print()
    print(doc)
    log(f"wrote {opts.out} and {json_path} in {elapsed:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
