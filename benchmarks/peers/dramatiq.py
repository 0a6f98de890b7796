"""Dramatiq: ``Actor.send()``; ``dramatiq`` with processes and threads."""

import dramatiq
from dramatiq.brokers.redis import RedisBroker

from peers import _common

SPEC = {
    "name": "dramatiq",
    "requirements": ["dramatiq[redis]"],
    "distributions": ["dramatiq", "redis"],
    "worker": ["{bin}/dramatiq", "peers.dramatiq", "-p", "{procs}", "-t", "8"],
    "enqueue_api": "noop.send()",
    "bulk": None,
    "no_bulk": "none: group(...).run() sends each message with its own enqueue script call",
}

broker = RedisBroker(url=_common.queue_url())
dramatiq.set_broker(broker)


@dramatiq.actor
def noop() -> None:
    _common.record_done()


@dramatiq.actor
def stamp() -> None:
    _common.record_start()


def send_noop() -> None:
    noop.send()


def send_stamp() -> None:
    stamp.send()
