"""Celery: ``Task.delay()``; ``celery worker -P prefork``, default settings, no result backend."""

from celery import Celery

from peers import _common

SPEC = {
    "name": "celery",
    "requirements": ["celery[redis]"],
    "distributions": ["celery", "kombu", "redis"],
    "worker": [
        "{bin}/celery",
        "-A",
        "peers.celery:app",
        "worker",
        "-P",
        "prefork",
        "-c",
        "{procs}",
        "--loglevel",
        "WARNING",
    ],
    "enqueue_api": "noop.delay()",
    # Celery has none (group(...).apply_async() publishes message by message); kombu >= 5.7's
    # Producer.batch() pipelines the publishes, so that is what W1b measures for Celery.
    "bulk": "apply_async(producer=p) N times inside kombu's p.batch(): one non-transactional pipeline "
    "(kombu >= 5.7; Celery itself has no bulk API, group() publishes one by one)",
}

app = Celery("bench", broker=_common.queue_url())
app.conf.broker_connection_retry_on_startup = True  # the default; set only to silence its warning


@app.task(name="bench.noop")
def noop() -> None:
    _common.record_done()


@app.task(name="bench.stamp")
def stamp() -> None:
    _common.record_start()


def send_noop() -> None:
    noop.delay()


def send_stamp() -> None:
    stamp.delay()


def send_noop_bulk(n: int) -> None:
    with app.producer_or_acquire() as producer, producer.batch(max_size=2 * n):
        for _ in range(n):
            noop.apply_async(producer=producer)
