"""What every command shares: loading APP, and turning errors into one line and an exit code.

Exit codes (docs/howto/operating.md): 0 ok, 1 runtime failure (e.g. broker unreachable),
2 usage error (bad APP, bad option, invalid JSON or time, a memory:// APP for
``worker`` or ``enqueue``).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import NoReturn
from urllib.parse import urlsplit

import click
import redis

from ..app import TaskForge
from ..broker.connection import redact
from ..errors import AppNotFound, BrokerUnavailable, ConfigurationError, TaskforgeError
from ..loader import load_app
from ..printable import printable

USAGE = 2
FAILURE = 1


def fail(message: str, code: int = FAILURE) -> NoReturn:
    """``Error: message`` on stderr, control characters escaped (a message may quote a name), and exit ``code``."""
    click.echo(f"Error: {printable(message, lines=True)}", err=True)
    sys.exit(code)


def open_app(spec: str) -> TaskForge:
    """Load APP or exit 2 with one line (plus the user's own traceback if their module raised)."""
    try:
        return load_app(spec)
    except AppNotFound as exc:
        if exc.details:
            click.echo(exc.details.rstrip(), err=True)
        fail(str(exc), USAGE)


def refuse_memory(app: TaskForge, spec: str, what: str) -> None:
    """Exit 2 when APP's broker is ``memory://``: private to this process, so ``what`` would be lost.

    A worker there serves nothing forever, and a job enqueued there vanishes
    when the command exits while its id is printed as if it were queued.
    """
    if urlsplit(app.url).scheme == "memory":
        fail(
            f"{spec} uses memory://, a broker private to this one process, so {what}; "
            "start a shared one with `taskforge broker` and set TASKFORGE_BROKER_URL to the URL it prints",
            USAGE,
        )


@contextmanager
def cli_errors() -> Iterator[None]:
    """Library errors become one line: configuration ones exit 2, the rest 1."""
    try:
        yield
    except BrokerUnavailable as exc:
        fail(str(exc), FAILURE)
    except ConfigurationError as exc:
        fail(str(exc), USAGE)
    except TaskforgeError as exc:
        fail(str(exc), FAILURE)
    except redis.RedisError as exc:  # e.g. WRONGTYPE from a key written by something else
        fail(f"Redis answered with an error: {redact(str(exc))}", FAILURE)
