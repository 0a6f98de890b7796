"""A lane's outbox: successes sent within FLUSH_AFTER by its thread, and none lost when the lane closes."""

from __future__ import annotations

import threading
import time

from taskforge.broker.record import Claim
from taskforge.worker.batches import FLUSH_AFTER, Done, Outbox


def a_claim(job_id: str) -> Claim:
    return Claim(job_id, "q", "tok", "t", (), {}, 1, 3, None, 1)


def test_closing_waits_for_what_the_thread_is_sending() -> None:
    sending, sent = threading.Event(), []

    def send(queue: str, items: list[Done]) -> None:
        sending.set()
        time.sleep(0.3)  # a slow reply: the lane closes meanwhile
        sent.extend(item.claim.id for item in items)

    outbox = Outbox(send, lambda claims: None, None, "test-outbox")
    outbox.add(a_claim("j1"), b"r")
    assert sending.wait(FLUSH_AFTER + 2)  # the thread took it: the lane ran a longer job meanwhile
    outbox.close()  # the child exits right after: the success must be in Redis by then
    assert sent == ["j1"]
