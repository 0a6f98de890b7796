"""What the client does inside redis-py's own hooks: the version check on connect, a command sent once.

Written once, awaited (``_async/handshake.py``, for redis.asyncio); the
redis-py side, ``_sync/handshake.py``, is generated from it by
``scripts/make_sync.py``, so the two cannot drift apart. Both run below the
plan drivers (``drivers.py``), inside the connection and its retry.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import redis

from ..compat import hello_error


def version_check(shown_url: str) -> Callable[[Any], Any]:
    """A ``redis_connect_func``: the usual handshake, then, once per client, a version check.

    The check is one HELLO on the first connection of the pool (HELLO needs
    no ACL permission); every later connection only does the handshake.
    """
    checked = False

    async def on_connect(connection: Any) -> None:  # a Connection of the client (untyped)
        nonlocal checked
        # Without a health check: its PING, failing on a socket that is no Redis (a TLS port),
        # would reconnect through this very function, again and again.
        await connection.on_connect_check_health(check_health=False)
        if checked:
            return
        await connection.send_command("HELLO", getattr(connection, "protocol", None) or 2)
        try:
            error = hello_error(await connection.read_response(), shown_url)
        except redis.ResponseError as exc:  # no HELLO at all: older than 6.0
            error = hello_error(exc, shown_url)
        if error is not None:
            await connection.disconnect()
            raise error
        checked = True

    return on_connect


async def try_once(errors: tuple[type[Exception], ...], do: Any, fail: Any, kwargs: dict[str, Any]) -> Any:
    """Inside ``sent_once()``: one try of a command, its failure told to the client and raised, not re-sent."""
    try:
        return await do()
    except errors as error:
        await (fail(error, 1) if kwargs.get("with_failure_count") else fail(error))
        raise
