"""Counting overlaps of time intervals: how many jobs ran at once, for the tests of concurrency caps."""

from __future__ import annotations


def most_at_once(spans: list[tuple[float, float]]) -> int:
    """The most intervals open at one moment (an end before a start at the same instant)."""
    events = sorted([(start, 1) for start, _ in spans] + [(end, -1) for _, end in spans])
    running = peak = 0
    for _, step in events:
        running += step
        peak = max(peak, running)
    return peak
