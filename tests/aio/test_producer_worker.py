"""The async producer against a real ``taskforge worker``: waiting never stalls the event loop.

The issue's must-be-true line is about time, so this one test measures it,
with a generous margin: a ticker coroutine that sleeps 10 ms at a time must
never be held up for 100 ms while ``aresult()`` waits a second for a job.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from taskforge import JobState, TaskFailed, TaskForge
from tests.worker.conftest import Worker, stop_workers

from .test_producer import run

pytestmark = [pytest.mark.redis, pytest.mark.slow]  # starts real workers

HERE = Path(__file__).parent
TICK = 0.01
# A loop blocked by the wait stalls for the job's whole second; a loaded machine (CI, load average 18 on
# two cores) delayed one 10 ms tick by 115 ms. Half a second tells the two apart.
MAX_GAP = 0.5


@pytest.fixture
def start_worker(tmp_path: Path, redis_url: str) -> Iterator[Callable[..., Worker]]:
    (tmp_path / "aioapp.py").write_text((HERE / "aioapp.py").read_text())
    started: list[Worker] = []

    def start(*args: str) -> Worker:
        worker = Worker(tmp_path, redis_url, list(args), tmp_path / f"worker-{len(started)}.log", "aioapp:app")
        started.append(worker)
        return worker

    yield start
    stop_workers(started)


async def ticker(stop: asyncio.Event, gaps: list[float]) -> None:
    last = time.monotonic()
    while not stop.is_set():
        await asyncio.sleep(TICK)
        now = time.monotonic()
        gaps.append(now - last)
        last = now


def test_a_ticker_keeps_its_rate_while_aresult_waits(redis_url: str, start_worker: Callable[..., Worker]) -> None:
    app = TaskForge("producer", broker=redis_url)
    start_worker("-c", "1")

    async def main() -> None:
        warm = await app.asend("aioapp.slow", 0.0, 0)
        assert await warm.aresult(timeout=60) == 0  # the worker is up and serving
        stop, gaps = asyncio.Event(), []
        ticking = asyncio.create_task(ticker(stop, gaps))
        h = await app.asend("aioapp.slow", 1.0, 42)
        started = time.monotonic()
        try:
            assert await h.aresult(timeout=30) == 42
        finally:
            stop.set()
            await ticking
        waited = time.monotonic() - started
        print(f"aresult waited {waited:.2f} s; {len(gaps)} ticks, the longest {max(gaps) * 1000:.1f} ms apart")
        assert waited >= 0.9, f"the job took a second; aresult returned after {waited:.2f} s"
        assert max(gaps) < MAX_GAP, f"the loop stalled for {max(gaps) * 1000:.0f} ms while aresult waited"
        assert len(gaps) >= waited / TICK / 5, f"only {len(gaps)} ticks in {waited:.2f} s"

    run(app, main)


def test_aabort_stops_a_running_job(redis_url: str, start_worker: Callable[..., Worker]) -> None:
    app = TaskForge("producer", broker=redis_url)
    start_worker("-c", "1")

    async def main() -> None:
        h = await app.asend("aioapp.slow", 30.0, 1)
        deadline = time.monotonic() + 60
        while await h.astatus() is not JobState.RUNNING:
            assert time.monotonic() < deadline, "the job never started"
            await asyncio.sleep(0.05)
        assert await h.aabort() is True
        with pytest.raises(TaskFailed) as stopped:
            await h.aresult(timeout=20)
        assert stopped.value.state == "cancelled"
        assert await h.aabort() is False  # finished: nothing left to stop

    run(app, main)
