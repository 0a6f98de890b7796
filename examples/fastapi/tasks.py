"""The worker's side of the FastAPI example: one ``async def`` task.

Run the worker with ``taskforge worker tasks:app -c 1`` from this directory.
The task awaits instead of blocking, so one child runs up to ``--async``
(default 100) of these at once on its event loop.
"""

import asyncio

from taskforge import TaskForge

app = TaskForge("shop")


@app.task(max_attempts=3, timeout=30)
async def make_thumbnail(name: str, size: int) -> dict[str, object]:
    """Stands in for async I/O (fetch the picture, resize it elsewhere, store it)."""
    await asyncio.sleep(0.2)
    return {"name": name, "thumbnail": f"thumbs/{size}/{name}", "bytes": size * size // 8}
