"""The caps under faults: no account ever ran more than KEY_CAP jobs of one keyed task at once, and
never more than SHARED_CAP jobs of the tasks sharing one named limit ran at once, whichever task.

The cap is per task and key (docs/howto/keys.md: another task's jobs with the same key are
not counted), so ``keyed`` and its async twin ``aio_keyed`` are counted apart.

Measured from the runs' own records (start and end, the side Redis), over
the runs no fault touched: a run cut short, or whose lease may have been
lost to a paused or restarted Redis, can overlap the run that replaced it,
by design (the fencing rule discards its outcome), as it can for any limit.
A clean run's interval lies inside its claim's hold on the key's slot (the
claim comes before the start record, the release after the end record), so
clean runs overlapping beyond the cap mean the cap was exceeded.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable

from ..intervals import most_at_once
from .analysis import Run, disruption
from .faults import Fault
from .jobs import KEY_CAP, SHARED, SHARED_CAP, JobPlan


def clean_runs(jobs: list[JobPlan], runs: dict[int, list[Run]], faults: list[Fault]) -> dict[str, list[Run]]:
    """Per "<task> <account>", the keyed runs no fault touched."""
    found: dict[str, list[Run]] = defaultdict(list)
    for job in jobs:
        if job.kind != "keyed" or job.token is None:
            continue
        for run in runs.get(job.token, []):
            if run.end is not None and run.outcome == "ok" and disruption(run, faults) is None:
                found[f"{job.task.rsplit('.', 1)[-1]} {job.extra[0]}"].append(run)
    return found


def check_key_caps(
    jobs: list[JobPlan], runs: dict[int, list[Run]], faults: list[Fault], problem: Callable[[str], None]
) -> str:
    """Adds a problem per account over the cap; returns a line for the report's stats."""
    found = clean_runs(jobs, runs, faults)
    peaks = {account: most_at_once([(r.start, r.end or r.start) for r in rs]) for account, rs in found.items()}
    counted = sum(len(rs) for rs in found.values())
    for account, peak in sorted(peaks.items()):
        if peak > KEY_CAP:
            shown = "; ".join(f"token {r.token} {r.describe()}" for r in sorted(found[account], key=lambda r: r.start))
            problem(
                f"KEY CAP EXCEEDED: {account} had {peak} keyed runs at once (key_concurrency={KEY_CAP}); "
                f"its clean runs: {shown}"
            )
    shown = ", ".join(f"{a}={p}" for a, p in sorted(peaks.items())) or "none"
    return f"keyed runs counted for the cap: {counted}, most at once per account (cap {KEY_CAP}): {shown}"


def check_shared_cap(
    jobs: list[JobPlan], runs: dict[int, list[Run]], faults: list[Fault], problem: Callable[[str], None]
) -> str:
    """The named limit shared by the SHARED kinds (sync and async twins alike, one limit): its clean
    runs never more than SHARED_CAP at once. Adds a problem if they were; returns a line for the stats."""
    found = [
        run
        for job in jobs
        if job.kind in SHARED and job.token is not None
        for run in runs.get(job.token, [])
        if run.end is not None and run.outcome == "ok" and disruption(run, faults) is None
    ]
    peak = most_at_once([(r.start, r.end or r.start) for r in found])
    if peak > SHARED_CAP:
        shown = "; ".join(f"token {r.token} {r.describe()}" for r in sorted(found, key=lambda r: r.start))
        problem(
            f"SHARED LIMIT EXCEEDED: {peak} runs at once of the tasks sharing limit 'screens' "
            f"(concurrency={SHARED_CAP}); their clean runs: {shown}"
        )
    return f"runs under the shared limit: {len(found)}, most at once {peak} (cap {SHARED_CAP})"
