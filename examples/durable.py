"""Durable steps and streams: an LLM-style pipeline that never pays twice for a finished step,
with a FastAPI endpoint that streams the answer to its client as the job writes it.

A question comes in over HTTP. The job retrieves documents, asks a (pretend)
model for an outline, waits out the provider's rate-limit window without
holding a worker, then writes the answer token by token. Its first run loses
the connection to the provider after the outline: the retry gets the
retrieval and the outline back from the job's record instead of paying for
them again, and the HTTP client sees one clean stream of tokens. Run a worker
and this script::

    taskforge worker durable:app -c 2    # terminal 1
    python durable.py                    # terminal 2: serves the API on a free port and asks it

or serve the API yourself (``uvicorn durable:api``) and ask it with
``curl -N -X POST 'localhost:8000/answers?question=why+redis'``.
"""

import http.client
import sys
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import uvicorn
from fastapi import FastAPI
from fastapi.responses import StreamingResponse

from taskforge import TaskForge, current_job

app = TaskForge("durable")


def retrieve(question: str, run: int) -> dict[str, object]:
    """The expensive call a retry must not repeat (a vector search, a paid API)."""
    time.sleep(0.2)
    return {"documents": ["queues.md", "redis.md", "durability.md"], "fetched_in_run": run}


def outline(question: str, documents: list[str]) -> list[str]:
    """A model call: a few points to answer with."""
    time.sleep(0.2)
    return ["jobs live in Redis", "a crash resumes after the last finished step", "readers see every token"]


def tokens(points: list[str]) -> list[str]:
    """The answer, word by word, as a model streams it."""
    return " ".join(f"{point.capitalize()}." for point in points).split(" ")


@app.task(max_attempts=3, backoff=0.1)
def answer(question: str) -> dict[str, object]:
    job = current_job()
    found = job.step("retrieve", retrieve, question, job.attempt)  # later runs get the stored result
    points = job.step("outline", outline, question, found["documents"])
    job.sleep(0.3)  # the provider's rate-limit window: no worker is held meanwhile
    if job.attempt == 1:
        raise ConnectionError("the model provider dropped the connection")  # retried: the steps stay
    for word in tokens(points):
        job.stream(word + " ")  # every reader sees it at once
        time.sleep(0.05)
    return {"retrieved_in_run": found["fetched_in_run"], "answered_in_run": job.attempt}


@asynccontextmanager
async def lifespan(api: FastAPI) -> AsyncIterator[None]:
    yield
    await app.aclose()  # the loop's Redis connections, closed with the loop


api = FastAPI(lifespan=lifespan)


@api.post("/answers")
async def ask(question: str) -> StreamingResponse:
    """Start the pipeline and stream its answer to the client as the job writes it."""
    handle = await answer.adelay(question)

    async def body() -> AsyncIterator[str]:
        async for word in handle.astream(timeout=30):
            yield word

    return StreamingResponse(body(), media_type="text/plain", headers={"X-Job-Id": handle.id})


def serve() -> tuple[uvicorn.Server, int]:
    """The API on a free local port, in a thread: (the server, its port)."""
    server = uvicorn.Server(uvicorn.Config(api, host="127.0.0.1", port=0, log_level="warning"))
    threading.Thread(target=server.run, daemon=True).start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline:
            sys.exit("the API did not start")
        time.sleep(0.01)
    return server, server.servers[0].sockets[0].getsockname()[1]


def main() -> None:
    server, port = serve()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request("POST", "/answers?question=why%20taskforge")
    response = conn.getresponse()
    handle = app.job(response.getheader("X-Job-Id"))
    received, first_while_running = [], None
    while chunk := response.read1(1024):
        if first_while_running is None:
            first_while_running = not handle.status().finished
        received.append(chunk.decode())
        print(chunk.decode(), end="", flush=True)
    print()
    info = handle.info()
    print(f"job {info.state.value} on attempt {info.attempts}: {info.result}")
    print(f"steps kept with the job: {', '.join(sorted(info.steps))}")
    print(f"the first words reached the HTTP client while the job ran: {first_while_running}")
    print(f"streamed {info.stream_length} words; the client got {len(''.join(received).split())}")
    server.should_exit = True


if __name__ == "__main__":
    main()
