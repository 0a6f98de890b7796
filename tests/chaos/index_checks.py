"""The search index after the faults: each job's entries, and nothing else.

Every record a producer stored (those ``cancel_steps`` writes in place of a
workflow step never sent have no task and are not listed) must have its
``t`` entry, a ``k`` entry when it has a key, a ``d`` entry
exactly while dead and a ``c`` entry exactly once cancelled; and no entry
may name a job without a record (none expires during a run). A transition
that forgot its entry, or a lost reply sent again that wrote one twice under
another stamp, shows here.
"""

from __future__ import annotations

from collections.abc import Callable

import redis

from taskforge.broker.keys import search_index


def expected_entries(job_id: str, fields: dict[bytes, bytes]) -> set[str]:
    created = int(fields[b"created_at"])
    task = fields[b"task"].decode()
    key = fields.get(b"key", b"").decode()
    stamp = f"{created:013d}{len(job_id.encode())}:{job_id}"
    entries = {f"t{len(task.encode())}:{task}{stamp}"}
    if key:
        entries.add(f"k{len(key.encode())}:{key}{stamp}")
    state = fields.get(b"state", b"").decode()
    if state in ("dead", "cancelled"):
        entries.add(state[0] + stamp)
    return entries


def check_index(
    client: redis.Redis,
    queues: set[str],
    job_keys: list[str],
    records: dict[str, dict[bytes, bytes]],
    problem: Callable[[str], None],
) -> int:
    """Compare each queue's index with its records (``job_keys`` name their queues); how many entries were checked."""
    by_queue: dict[str, set[str]] = {queue: set() for queue in queues}
    for key in job_keys:
        queue = key[key.index("{") + 1 : key.index("}")]
        job_id = key.rsplit(":", 1)[1]
        fields = records.get(job_id, {})
        if b"task" in fields and queue in by_queue:
            by_queue[queue] |= expected_entries(job_id, fields)
    checked = 0
    for queue, wanted in sorted(by_queue.items()):
        found = {m.decode() for m in client.zrange(search_index(queue), 0, -1)}
        checked += len(found)
        for entry in sorted(wanted - found)[:5]:
            problem(f"{queue} index: entry {entry!r} missing (of {len(wanted - found)})")
        for entry in sorted(found - wanted)[:5]:
            problem(f"{queue} index: entry {entry!r} names no job in that state (of {len(found - wanted)})")
    return checked
