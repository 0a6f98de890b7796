"""RQ: ``Queue.enqueue()``, ``Queue.enqueue_many()``; ``rq worker-pool`` of SimpleWorkers."""

from redis import Redis
from rq import Queue

from peers import _common

SPEC = {
    "name": "rq",
    "requirements": ["rq"],
    "distributions": ["rq", "redis"],
    "worker": [
        "{bin}/rq",
        "worker-pool",
        "-n",
        "{procs}",
        "-w",
        "rq.worker.SimpleWorker",
        "-u",
        "{queue_url}",
        "-q",
        "default",
    ],
    "enqueue_api": "queue.enqueue(noop)",
    "bulk": "queue.enqueue_many([Queue.prepare_data(noop)] * N): one MULTI/EXEC pipeline",
}


def noop() -> None:
    _common.record_done()


def stamp() -> None:
    _common.record_start()


queue = Queue("default", connection=Redis.from_url(_common.queue_url()))


def send_noop() -> None:
    queue.enqueue(noop)


def send_stamp() -> None:
    queue.enqueue(stamp)


def send_noop_bulk(n: int) -> None:
    queue.enqueue_many([Queue.prepare_data(noop) for _ in range(n)])
