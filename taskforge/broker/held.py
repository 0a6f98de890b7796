"""Why a pending job does not start: its queue is paused, or its lane is held back by limits.

A keyed job waits in a lane (``lua/lib/lanes.lua``): one key's jobs of one
priority band, named "<band>:<n>:<task><key>" (n: the task's length in
bytes, 0 for a task without limits). A lane whose task's limits
(``key_concurrency``, ``key_rate_limit``, or the task-wide ``concurrency``
and ``rate_limit``) say no has its head in the queue's ``held`` set until a
slot frees or its window opens (``held_head``: lane -> head). Nothing is
written for the reason: it is read back from the same keys the claim looked
at, in one pipelined round trip, for ``JobHandle.info()``, ``taskforge job``
and the dashboard (sync and async callers queue the same reads; ``reason``
reads the replies).
"""

from __future__ import annotations

from typing import Any

from .keys import QueueKeys

HELD_CHUNK = 1000  # lanes counted per pipelined round trip


def lane_parts(lane: str) -> tuple[str | None, str, str]:
    """(task, key, rest) of a lane "<band>:<n>:<task><key>": task None for a lane without
    limits; rest is the lane without its band (what its per-key limits are counted under)."""
    rest = lane[2:]
    size, _, tail = rest.partition(":")
    n = int(size) if size.isdigit() else 0
    raw = tail.encode()
    if n == 0:
        return None, tail, rest
    return raw[:n].decode(errors="replace"), raw[n:].decode(errors="replace"), rest


def queue_reads(pipe: Any, q: QueueKeys, lane: str | None) -> None:
    """Queue the reads ``reason`` needs on ``pipe`` (a pipeline, sync or async)."""
    pipe.exists(q.paused)
    if lane is None:
        return
    task, _, rest = lane_parts(lane)
    pipe.hget(q.held_head, lane)
    pipe.time()
    for hash_key in (q.limits, q.key_limits):
        pipe.hget(hash_key, task or "")
    pipe.scard(f"{q.prefix}active:{task or ''}")
    pipe.scard(f"{q.prefix}key_active:{rest}")
    pipe.zrange(f"{q.prefix}rate:{task or ''}", 0, -1, withscores=True)
    pipe.zrange(f"{q.prefix}key_rate:{rest}", 0, -1, withscores=True)


def reason(lane: str | None, replies: list[Any]) -> str | None:
    """What holds the job back, in words, from the replies of ``queue_reads`` (None: nothing does)."""
    if replies[0]:
        return "its queue is paused"
    if lane is None or replies[1] is None:
        return None
    _, now, task_spec, key_spec, task_active, key_active, task_starts, key_starts = replies[1:]
    task, key, _ = lane_parts(lane)
    now_ms = int(now[0]) * 1000 + int(now[1]) // 1000
    for spec, active, starts, prefix, what in (
        (key_spec, key_active, key_starts, "key_", f"for key {key!r}"),
        (task_spec, task_active, task_starts, "", f"for task {task}"),
    ):
        rate, period, concurrency = _spec(spec)
        if concurrency and active >= concurrency:
            return f"{prefix}concurrency={concurrency} reached {what} ({active} running)"
        recent = sum(1 for _, at in starts if at > now_ms - period)
        if rate and recent >= rate:
            return f"{prefix}rate_limit={rate_text(rate, period)} reached {what}"
    return f"held back by its task's limits for key {key!r} (looked at again within seconds)"


def rate_text(rate: int, period_ms: int) -> str:
    """10, 1000 -> '10/s'; 5, 60000 -> '5/m'; 3, 2500 -> '3/2.5s'."""
    for unit, ms in (("h", 3_600_000), ("m", 60_000), ("s", 1000)):
        if period_ms == ms:
            return f"{rate}/{unit}"
    return f"{rate}/{period_ms / 1000:g}s"


def _spec(raw: bytes | None) -> tuple[int, int, int]:
    """(rate, period_ms, concurrency) of a limits hash value "rate:period_ms:concurrency" (zeros when missing)."""
    try:
        own = (raw or b"").decode().split("|")[0]  # the task's own limits, before the shared ones it names
        rate, period, concurrency = (int(part) for part in own.split(":"))
    except ValueError:
        return 0, 1000, 0
    return rate, period, concurrency
