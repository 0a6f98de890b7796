"""``WakeWaiter``: a wait over wake lists in several slots lasts its whole timeout unless a token comes."""

from __future__ import annotations

import threading
import time

import pytest

from taskforge.broker import slots
from taskforge.broker.slots import WakeWaiter
from tests.conftest import admin_client

pytestmark = [pytest.mark.redis]


def test_a_pop_that_ends_empty_does_not_end_the_wait(redis_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(slots, "POP_BLOCK", 0.2)  # each pop ends empty well before the wait's timeout
    client = admin_client(redis_url)
    keys = ["taskforge:{waiter-a}:wake", "taskforge:{waiter-b}:wake"]
    client.delete(*keys)
    waiter = WakeWaiter(client, [[keys[0]], [keys[1]]])
    try:
        started = time.monotonic()
        assert waiter.wait(1.0) is False
        assert time.monotonic() - started >= 0.95  # not at the first empty pop (0.2 s)
        pusher = threading.Timer(0.5, lambda: client.rpush(keys[1], "1"))
        pusher.start()
        started = time.monotonic()
        assert waiter.wait(5.0) is True  # the token came after two empty rounds of pops
        assert time.monotonic() - started < 4.5
        pusher.join()
    finally:
        waiter.close()
        client.delete(*keys)
