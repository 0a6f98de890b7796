"""taskforge: ``Task.delay()``, ``Task.delay_many()``, ``taskforge worker``."""

from peers import _common
from taskforge import TaskForge

SPEC = {
    "name": "taskforge",
    "requirements": ["{repo}"],
    "distributions": ["taskforge-redis", "redis", "msgpack"],
    # Two processes of eight lanes (threads) each: the shape of Dramatiq's `-p 2 -t 8`.
    "worker": [
        "{bin}/taskforge",
        "worker",
        "peers.taskforge:app",
        "-c",
        "{procs}",
        "-t",
        "8",
        "--log-level",
        "warning",
    ],
    "burst": "--burst",
    "enqueue_api": "noop.delay()",
    "bulk": "noop.delay_many(calls): one EVALSHA of the enqueue script for all N",
}

app = TaskForge("bench", broker=_common.queue_url())


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
    noop.delay_many([()] * n)
