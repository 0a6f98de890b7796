"""``taskforge broker``: the embedded development broker, until Ctrl-C or SIGTERM."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import click

from ..broker.connection import ENV_VAR
from .common import FAILURE, fail

BANNER = """\
taskforge development broker: FOR DEVELOPMENT ONLY, NOT FOR PRODUCTION.
  in-memory: every job is lost when it stops; single process; several times slower than Redis.
  Use Redis (https://redis.io) for anything that matters.
"""


@contextmanager
def stop_on_signals(stop: threading.Event) -> Iterator[None]:
    """SIGINT and SIGTERM set ``stop`` instead of raising somewhere in the middle of things."""

    def handler(*_: object) -> None:
        stop.set()

    previous: dict[signal.Signals, Any] = {}
    for signum in (signal.SIGINT, signal.SIGTERM):
        previous[signum] = signal.signal(signum, handler)
    try:
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=6379,
    show_default=True,
    help="Port to listen on (0: any free port).",
)
def broker(host: str, port: int) -> None:
    """Run an in-memory Redis-protocol broker for development (fakeredis with Lua).

    Prints the URL to give workers and producers, then serves until Ctrl-C or
    SIGTERM (exit 0). Not for production: everything is lost when it stops,
    and it is several times slower than Redis.

    \b
    Example:
      taskforge broker --port 6380
      TASKFORGE_BROKER_URL=redis://127.0.0.1:6380/0 taskforge worker myapp:app
    """
    from ..devbroker import DevBroker
    from ..errors import BrokerStartError

    server = DevBroker(host, port)
    stop = threading.Event()
    with stop_on_signals(stop):
        try:
            url = server.start()
        except BrokerStartError as exc:
            fail(str(exc), FAILURE)
        try:
            click.echo(BANNER)
            click.echo(f"Listening on {url}")
            click.echo(f"  export {ENV_VAR}={url}")
            click.echo("Press Ctrl-C to stop.")
            while not stop.wait(0.5):
                pass
        finally:
            server.stop()
    click.echo("broker stopped")
