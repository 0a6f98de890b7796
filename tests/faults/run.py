"""The full fault suite: every scenario under each seed, then one table (Markdown).

    python -m tests.faults.run --seeds 11 12 21
    python -m tests.faults.run --seeds 5 --only partition drop-ack

Needs redis-server and, for the skew scenario, libfaketime
(``apt-get install faketime libfaketime``). Exits 1 when a scenario broke a
promise (a job lost where the mode promises none, an unexplained duplicate,
an early delayed job, a false "taken over" line, a hook missing or doubled).
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict

from .scenarios import PLANS, Result, run

COLUMNS = (
    "fault",
    "mode",
    "seeds",
    "jobs",
    "workflows",
    "lost",
    "duplicated (explained)",
    "early",
    "late max s",
    "false fenced",
    "hooks off",
    "faults injected",
)


def table(results: list[Result]) -> str:
    by: dict[str, list[Result]] = defaultdict(list)
    for result in results:
        by[result.scenario].append(result)
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for name, group in by.items():
        cells = [
            name,
            group[0].mode,
            " ".join(str(r.seed) for r in group),
            str(sum(r.jobs for r in group)),
            str(sum(r.workflows for r in group)),
            str(sum(r.lost for r in group)),
            f"{sum(r.duplicated for r in group)} ({sum(r.explained for r in group)})",
            str(sum(r.early for r in group)),
            f"{max(r.late_s for r in group):.2f}",
            str(sum(r.false_fenced for r in group)),
            str(sum(r.hooks_off for r in group)),
            " / ".join(dict.fromkeys(r.faults for r in group)),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.faults.run", description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[11])
    parser.add_argument("--only", nargs="+", choices=sorted(PLANS), default=list(PLANS))
    args = parser.parse_args(argv)
    results = []
    for name in args.only:
        for seed in args.seeds:
            result = run(PLANS[name], seed)
            results.append(result)
            print(f"{name} seed {seed}: {'ok' if result.ok else 'BROKEN'} in {result.seconds:.1f} s", flush=True)
            for problem in result.problems[:10]:
                print(f"    {problem}", flush=True)
    print()
    print(table(results))
    return 0 if all(r.ok for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
