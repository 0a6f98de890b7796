"""Simulating a reply that Redis sent but the client never read (a connection lost after the script ran)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import redis

from taskforge.broker import Broker
from taskforge.errors import BrokerUnavailable


def lose_reply(broker: Broker, call: Callable[[], object]) -> Any:
    """Run ``call`` with the reply of its first script run dropped; returns that reply, decoded.

    The script runs in Redis for real; the client sees a connection error, as
    it would when the connection drops between the write and the reply.
    """
    seen: list[Any] = []
    real = broker.scripts.run

    def run_then_drop(script_call: Any) -> Any:
        if seen:
            return real(script_call)
        seen.append(real(script_call))
        raise redis.ConnectionError("the connection dropped before the reply arrived")

    broker.scripts.run = run_then_drop  # type: ignore[method-assign]
    try:
        call()
    except (BrokerUnavailable, redis.ConnectionError):
        pass
    else:
        raise AssertionError("the call answered although its reply was dropped")
    finally:
        del broker.scripts.run
    assert seen, "the call never ran its script"
    return seen[0]
