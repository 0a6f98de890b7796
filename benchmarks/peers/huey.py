"""Huey: calling the task enqueues it; ``huey_consumer -k process``."""

from huey import RedisHuey

from peers import _common

SPEC = {
    "name": "huey",
    "requirements": ["huey", "redis"],
    "distributions": ["huey", "redis"],
    "worker": ["{bin}/huey_consumer", "peers.huey.huey", "-k", "process", "-w", "{procs}", "-q"],
    "enqueue_api": "noop()  (TaskWrapper.__call__)",
    "bulk": None,
    "no_bulk": "none: Task.map() is a loop of enqueue(), one LPUSH round trip per job",
}

huey = RedisHuey("bench", url=_common.queue_url())


@huey.task()
def noop() -> None:
    _common.record_done()


@huey.task()
def stamp() -> None:
    _common.record_start()


def send_noop() -> None:
    noop()


def send_stamp() -> None:
    stamp()
