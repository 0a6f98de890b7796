"""SAQ: ``await Queue.enqueue()`` (asyncio); ``saq --workers``, default concurrency 10 per process."""

from saq import Queue

from peers import _common

SPEC = {
    "name": "saq",
    "requirements": ["saq[redis]", "typing_extensions"],  # saq 0.26.4 imports it without declaring it
    "distributions": ["saq", "redis"],
    "worker": ["{bin}/saq", "peers.saq.settings", "--workers", "{procs}"],
    "enqueue_api": "await queue.enqueue('noop')",
    "bulk": None,
    "no_bulk": "none: Queue.map() enqueues one by one and waits for the results",
}

queue = Queue.from_url(_common.queue_url(), name="bench")


async def noop(ctx) -> None:
    await _common.arecord_done()


async def stamp(ctx) -> None:
    await _common.arecord_start()


settings = {"queue": queue, "functions": [noop, stamp]}


async def open_producer() -> None:
    await queue.connect()


async def close_producer() -> None:
    await queue.disconnect()


async def send_noop() -> None:
    await queue.enqueue("noop")


async def send_stamp() -> None:
    await queue.enqueue("stamp")
