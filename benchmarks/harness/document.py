"""The Markdown report of one run of ``benchmarks/run.py`` (also written to RESULTS.md)."""

from __future__ import annotations

import argparse
import re
from typing import Any

from . import costs, scripttimes
from .peers import Peer
from .report import Results, targets_table
from .workloads import Settings


def markdown(
    opts: argparse.Namespace,
    argv_text: str,
    env: dict[str, Any],
    peers: list[Peer],
    results: Results,
    settings: Settings,
    elapsed: float,
    fingerprint: str,
    targets: list[dict[str, Any]],
) -> str:
    """The report: machine, libraries and their command lines, results, commands, script times, targets."""
    names = [p.name for p in peers if not p.unavailable]
    # Where the venvs are cached (--cache, --taskforge-src) changes no figure and names a local path: left out.
    cmd = "python3 benchmarks/run.py " + re.sub(r"\s--(cache|taskforge-src)[ =]\S+", "", " " + argv_text).strip()
    lines = [
        "# taskforge and its peers, side by side (issues #6 and #15)",
        "",
        f"Generated {env['date']} by `{cmd.strip()}` in {elapsed / 60:.1f} min: N = {opts.n:,} jobs, "
        f"{opts.runs} round(s) per library, W3 over {opts.latency_jobs} jobs, commands counted over "
        f"{opts.cmd_n:,} jobs. Each cell: median (min–max) of the rounds.",
        "",
        "## Machine",
        "",
        f"- CPU: {env['cpu']}, {env['cores']} cores; load average at start {env['load_average']}, "
        f"at end {env.get('load_average_end')}",
        f"- {env['os']}; harness Python {env['harness_python']}; Redis {env['redis_version']} at {env['redis']}",
        f"- taskforge source fingerprint {fingerprint} (sha256 of taskforge/ and pyproject.toml)",
        "- shared machine: other test runs were using the same cores and Redis, so absolute "
        "numbers are noisy; compare within this table only",
        "",
        "## Libraries and worker command lines",
        "",
        f"Each worker runs {opts.procs} processes, per-job logging off, from `benchmarks/` in the library's "
        "own venv (`benchmarks/.cache/venvs/<library>`).",
        "",
        "| library | versions | worker command line | enqueue API | bulk API |",
        "|---|---|---|---|---|",
    ]
    for peer in peers:
        versions = ", ".join(f"{k} {v}" for k, v in peer.versions.items()) or "—"
        bulk = peer.spec.get("bulk") or peer.spec.get("no_bulk", "—")
        lines.append(
            f"| {peer.name} | {versions} | `{peer.worker_display(opts.procs, settings.queue_url)}` | "
            f"`{peer.spec.get('enqueue_api', '')}` | {bulk} |"
        )
    lines += [
        "",
        "## Results",
        "",
        *results.results_table(names),
        "",
        f"Clients: hiredis {'in every venv' if opts.hiredis == 'yes' else 'in no venv'}; redis-py as each "
        f"library resolves it{f' (peers pinned to {opts.peer_redis_py})' if opts.peer_redis_py else ''}; "
        f"completion side effect: {opts.side_effect}. "
        "W1 / SET floor: the enqueue rate over the rate of bare redis-py SETs in the same producer "
        "process, measured right after it. W2 from worker start includes process start-up and imports; "
        "first→last excludes them. W3: from the start of the enqueue call to the start of the task body. "
        f"Worker start: median of {opts.start_runs} spawn(s) of the worker with one job queued, until that "
        "job's body starts.",
        "",
        "## Redis commands per job",
        "",
        *results.commands_table(names),
        "",
        f"Counted once per library with MONITOR over {opts.cmd_n:,} jobs, on the queue database only "
        "(the benchmark's counter and polling live in another database). A script call (EVALSHA) "
        "is one client command; the commands it runs inside Redis (MONITOR shows them with the client "
        '"lua") are counted apart, and the total is what Redis executes per job. '
        "Drain counts run from worker start to the last completion, so worker start-up and its "
        "periodic housekeeping are included, spread over the jobs. "
        f"Idle: {opts.idle:g} s of a running worker on an empty queue, after 1 s of settling.",
        "",
        "## taskforge: Redis time per script",
        "",
        *(scripttimes.table(results.scripts) if results.scripts else ["(not measured in this run)"]),
        "",
        f"Every EVALSHA of an untimed enqueue + drain of {opts.script_n:,} jobs, from the slow log with "
        "`slowlog-log-slower-than 0` (Redis's own execution time, without round trip or parsing; no MONITOR "
        "running). The sha of each call is matched to the script by the taskforge in the venv.",
        "",
        "## What each job costs Redis (issue #50)",
        "",
        *costs_section(opts, results),
        "## taskforge against the targets of issue #15",
        "",
        "The best taskforge worker shape for each workload against the best other library.",
        "",
        *targets_table(targets),
        "",
    ]
    failures = [(peer.name, peer.unavailable) for peer in peers if peer.unavailable]
    failures += [(peer, err) for peer, errs in results.errors.items() for err in errs]
    if failures:
        lines += ["## Failures", ""] + [f"- {name}: {why}" for name, why in failures] + [""]
    return "\n".join(lines)


def costs_section(opts: argparse.Namespace, results: Results) -> list[str]:
    """Memory per queued and finished job with where the bytes go, and Redis time per job's life."""
    lines = ["### Redis memory per job", ""]
    if results.memory:
        lines += [
            *costs.memory_table(results),
            "",
            f"`INFO memory` used_memory (script cache left out) after {opts.mem_n:,} jobs through the normal API "
            "on the emptied queue database, no worker running, minus the empty database, over N; then the same "
            "after the library's worker drained them and stopped (what its default keeps). Server-wide: "
            "clean only with no other client connected (last column).",
            "",
            "Where the bytes go: every key of the queue database grouped by kind (ids as `*`), `MEMORY USAGE "
            "key SAMPLES 0` (key, value and its keyspace entry). What no key holds is the delta minus their "
            "sum; it is negative when MEMORY USAGE overestimates a type (a stream's, RQ's `rq:results:*`).",
            "",
            *costs.breakdown_table(results),
            "",
            *costs.record_fields(results),
            "",
        ]
    else:
        lines += ["(not measured in this run)", ""]
    lines += ["### Redis time per job's life", ""]
    if results.redis_time:
        server = next(iter(results.redis_time.values()))["server"]
        lines += [
            *costs.time_table(results),
            "",
            f"{opts.time_n:,} jobs through the normal API, then the worker's drain, on a private {server} started "
            "for this pass (the counter on the harness's Redis); `CONFIG RESETSTAT` before each phase, "
            "`INFO commandstats` after it, the harness's INFO/CONFIG/FLUSHDB left out. µs: the commands clients "
            "sent, a script's inner commands inside its time only (they also have lines of their own, split off "
            "by the share MONITOR saw inside scripts: the '+' figures); 'every line summed' counts them twice. "
            "Redis CPU: the server's user + system time over the phase (parsing and networking included).",
            "",
        ]
    else:
        lines += ["(not measured in this run)", ""]
    return lines
