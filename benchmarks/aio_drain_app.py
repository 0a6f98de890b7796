"""The app ``aio_drain.py`` runs: the same work as a sync task and as an async one."""

import asyncio
import os
import time

from taskforge import TaskForge

app = TaskForge("aio-drain", os.environ["AIO_DRAIN_REDIS"])


@app.task
def noop() -> None:
    return None


@app.task
async def anoop() -> None:
    return None


@app.task
def nap(seconds: float) -> None:
    time.sleep(seconds)


@app.task
async def anap(seconds: float) -> None:
    await asyncio.sleep(seconds)
