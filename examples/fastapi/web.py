"""The web side: a FastAPI app that enqueues jobs and awaits their results.

Run it with ``uvicorn web:api`` from this directory, beside a worker
(``taskforge worker tasks:app``). Every call below is awaited on the
server's own event loop: none of them blocks it, so the server keeps
answering other requests while one of them waits for a result.
"""

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI, HTTPException
from tasks import app as taskforge_app
from tasks import make_thumbnail

from taskforge import JobNotFound, TaskFailed


@asynccontextmanager
async def lifespan(api: FastAPI) -> AsyncIterator[None]:
    yield
    await taskforge_app.aclose()  # the loop's Redis connections, closed with the loop


api = FastAPI(lifespan=lifespan)


@api.post("/thumbnails/{name}", status_code=202)
async def enqueue(name: str, size: int = 128) -> dict[str, str]:
    """Enqueue and answer at once: the client polls /jobs/{id} (or keeps the id for later)."""
    handle = await make_thumbnail.adelay(name, size)
    return {"job": handle.id}


@api.get("/jobs/{job_id}")
async def job_status(job_id: str, wait: float = 0.0) -> dict[str, object]:
    """A job's state; with ``wait`` seconds, await its result that long first."""
    handle = taskforge_app.job(job_id)  # in a running loop, the lookup waits for the first awaited call
    try:
        if wait > 0:
            return {"job": job_id, "state": "succeeded", "result": await handle.aresult(timeout=wait)}
        return {"job": job_id, "state": (await handle.astatus()).value}
    except TimeoutError:
        return {"job": job_id, "state": (await handle.astatus()).value}
    except TaskFailed as exc:
        return {"job": job_id, "state": exc.state, "error": str(exc)}
    except JobNotFound:
        raise HTTPException(status_code=404, detail=f"no job {job_id}") from None


@api.post("/thumbnails/{name}/now")
async def make_now(name: str, size: int = 128) -> dict[str, object]:
    """Enqueue and await the result within the request (up to 10 s)."""
    handle = await make_thumbnail.adelay(name, size)
    try:
        return await handle.aresult(timeout=10)
    except TimeoutError:
        raise HTTPException(status_code=504, detail=f"job {handle.id} is still running") from None
