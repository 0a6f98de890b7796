"""Periodic tasks: ``@app.periodic(cron=... | every=...)``, enqueued by the workers.

There is no separate beat process: every ``taskforge worker`` (unless
``--no-periodic``) runs a scheduler in its supervisor. Each tick is enqueued
exactly once however many workers run: the enqueue script claims the tick's
key with SET NX (TTL two periods) in the same atomic step that stores the job.

Ticks missed while no worker ran are not replayed in a burst: a scheduler
that starts enqueues only the most recent tick (at most one catch-up), and
only if no worker enqueued it already; ``catch_up=False`` skips that one
too, so the task's first run is its next tick.

Which tick is due comes from Redis's clock (``broker/clock.py``), not the
worker's: workers whose clocks disagree by minutes still agree on the tick,
so each runs once, on time by Redis's clock.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from .bounds import is_real_number
from .building import build_job
from .errors import BrokerUnavailable, ConfigurationError, QueueFull

if TYPE_CHECKING:
    from croniter import croniter

    from .broker.clock import RedisClock
    from .task import Task

log = logging.getLogger("taskforge.periodic")

MIN_TICK_TTL = 60.0


@dataclass(frozen=True)
class Schedule:
    """When one periodic task runs: a cron expression in a timezone, or a fixed interval."""

    task: Task[Any, Any]
    cron: str | None = None
    timezone: str = "UTC"
    every: float | None = None
    catch_up: bool = True  # a starting scheduler enqueues the latest tick, before its start, if no worker did

    @classmethod
    def build(
        cls, task: Task[Any, Any], cron: str | None, tz: str, every: timedelta | float | None, catch_up: bool = True
    ) -> Schedule:
        if not isinstance(catch_up, bool):
            raise ConfigurationError(f"catch_up={catch_up!r}: use True or False")
        if (cron is None) == (every is None):
            raise ConfigurationError("@app.periodic needs exactly one of cron='*/5 * * * *' or every=timedelta(...)")
        seconds = None
        if every is not None:
            seconds = every.total_seconds() if isinstance(every, timedelta) else every
            if not is_real_number(seconds) or seconds < 1:
                raise ConfigurationError(f"every={every!r}: use a timedelta or seconds >= 1")
        try:
            ZoneInfo(tz)
        except (ZoneInfoNotFoundError, ValueError):
            raise ConfigurationError(f"timezone={tz!r}: not a known IANA zone (e.g. 'Europe/Paris')") from None
        if cron is not None:
            from croniter import croniter

            if not isinstance(cron, str) or not croniter.is_valid(cron):
                raise ConfigurationError(f"cron={cron!r}: not a valid cron expression (e.g. '*/5 * * * *')")
        every_s = None if seconds is None else float(seconds)
        return cls(task=task, cron=cron, timezone=tz, every=every_s, catch_up=catch_up)

    def latest(self, now: datetime) -> datetime:
        """The most recent tick at or before ``now`` (an aware datetime)."""
        if self.every is not None:
            period_ms = int(self.every * 1000)
            ms = int(now.timestamp() * 1000) // period_ms * period_ms
            return datetime.fromtimestamp(ms / 1000, tz=timezone.utc)
        local = now.astimezone(ZoneInfo(self.timezone))
        return self._ticks(local + timedelta(microseconds=1)).get_prev(datetime)

    def following(self, now: datetime) -> datetime:
        """The first tick after ``now``."""
        if self.every is not None:
            return self.latest(now) + timedelta(seconds=self.every)
        return self._ticks(now.astimezone(ZoneInfo(self.timezone))).get_next(datetime)

    def _ticks(self, start: datetime) -> croniter:
        """The cron expression's ticks around ``start`` (croniter is imported only by a cron schedule)."""
        from croniter import croniter

        if self.cron is None:  # build() sets exactly one of cron and every
            raise AssertionError("a schedule without every= has a cron expression")
        return croniter(self.cron, start)

    def period(self, now: datetime) -> float:
        if self.every is not None:
            return self.every
        return max(1.0, (self.following(now) - self.latest(now)).total_seconds())

    def describe(self) -> str:
        return f"every {self.every:g} s" if self.every is not None else f"cron {self.cron!r} ({self.timezone})"


class Scheduler:
    """Enqueues due ticks of an app's periodic tasks; one per worker supervisor."""

    def __init__(self, schedules: list[Schedule], clock: RedisClock | None = None) -> None:
        self.schedules = schedules
        self.clock = clock  # None: this process's clock (tests pass ``now``)
        self.done: dict[str, datetime] = {}

    def run_due(self, now: datetime | None = None) -> int:
        """Enqueue each schedule's latest tick unless this or another worker did; returns how many."""
        if now is None:
            now = self.redis_now() if self.clock is not None else datetime.now(timezone.utc)
        if now is None:
            return 0
        enqueued = 0
        for schedule in self.schedules:
            tick = schedule.latest(now)
            last = self.done.get(schedule.task.name)
            if last == tick:
                continue
            if last is None and not schedule.catch_up:
                self.done[schedule.task.name] = tick  # before this start: its first tick is the next one
                continue
            before = schedule.latest(tick - timedelta(milliseconds=1))
            # A running scheduler that missed the tick before this one (its process stalled past
            # it: a loaded machine) enqueues it late, one at most; a starting one replays nothing.
            for due in ([before] if last is not None and before > last else []) + [tick]:
                enqueued += self.enqueue_tick(schedule, due, now)
        return enqueued

    def enqueue_tick(self, schedule: Schedule, tick: datetime, now: datetime) -> int:
        """Enqueue one tick unless a worker did: 1 if this call stored it."""
        task = schedule.task
        tick_ms = int(tick.timestamp() * 1000)
        ttl_ms = int(max(MIN_TICK_TTL, 2 * schedule.period(now)) * 1000)
        job = replace(build_job(task, (), {}), tick_ms=tick_ms, lock_ttl_ms=ttl_ms)
        try:
            [job_id] = task.app.broker.jobs.enqueue(task.queue, [job], task.app.max_size)
        except BrokerUnavailable:
            # The worker's outage lines already say where and why; one short line per tick is enough.
            log.warning("periodic %s: the broker is unreachable; will retry the tick", task.name)
            return 0
        except QueueFull as exc:
            log.warning("periodic %s: %s; will retry", task.name, exc)
            return 0
        self.done[task.name] = tick
        if not job_id:
            return 0
        log.info("periodic %s: enqueued the tick of %s as %s", task.name, tick.isoformat(), job_id)
        return 1

    def redis_now(self) -> datetime | None:
        """Redis's time when a tick may be due, else None: no round trip on the passes between ticks.

        The estimate from the last ``TIME`` read says whether any schedule has a
        tick it has not taken; only then is ``TIME`` read afresh, and that
        reading decides (an estimate a few ms ahead never enqueues early).
        """
        estimate = self.estimate()
        if all(self.done.get(s.task.name) == s.latest(estimate) for s in self.schedules):
            return None
        if self.clock is None:
            raise AssertionError("redis_now() needs a clock")
        return datetime.fromtimestamp(self.clock.sync() / 1000, tz=timezone.utc)

    def estimate(self) -> datetime:
        """Redis's time as the last ``TIME`` read puts it (this process's clock without one)."""
        return self.clock.now() if self.clock is not None else datetime.now(timezone.utc)
