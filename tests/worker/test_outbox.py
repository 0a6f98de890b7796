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

    def send(queue: str, items: list[Done], marks: list[Claim]) -> None:
        sending.set()
        time.sleep(0.3)  # a slow reply: the lane closes meanwhile
        sent.extend(item.claim.id for item in items)

    outbox = Outbox(send, lambda claims: None, None, "test-outbox")
    outbox.add(a_claim("j1"), b"r")
    assert sending.wait(FLUSH_AFTER + 2)  # the thread took it: the lane ran a longer job meanwhile
    outbox.close()  # the child exits right after: the success must be in Redis by then
    assert sent == ["j1"]


Sent = list[tuple[list[str], list[str]]]


def recording_outbox() -> tuple[Outbox, Sent]:
    sends: Sent = []

    def send(queue: str, items: list[Done], marks: list[Claim]) -> None:
        sends.append(([item.claim.id for item in items], [claim.id for claim in marks]))

    return Outbox(send, lambda claims: None, None, "test-outbox"), sends


def test_a_start_is_said_within_flush_after_and_a_run_that_ends_sooner_needs_none() -> None:
    outbox, sends = recording_outbox()
    first, second, third = a_claim("j1"), a_claim("j2"), a_claim("j3")
    outbox.start_batch([first, second, third])
    for claim in (first, second):  # over at once (failed, recorded on the spot): nothing to say
        assert outbox.next_claim() is claim
        outbox.starting(claim)
        outbox.ended(claim)
    assert outbox.next_claim() is third
    outbox.starting(third)  # runs long: its claim marked it unstarted, the thread says it started
    time.sleep(FLUSH_AFTER + 0.5)
    outbox.close()
    assert sends == [([], ["j3"])]


def test_a_long_runs_success_is_sent_with_the_next_start_before_that_job_starts() -> None:
    outbox, sends = recording_outbox()
    first, second = a_claim("j1"), a_claim("j2")
    outbox.start_batch([first, second])
    assert outbox.next_claim() is first
    outbox.starting(first)  # the claim's first job: charged with it, no mark to send
    time.sleep(FLUSH_AFTER * 2)
    outbox.add(first, b"r")
    outbox.ended(first)
    assert outbox.next_claim() is second
    outbox.starting(second)  # sent here, in the lane, before the job runs
    assert sends == [(["j1"], ["j2"])]
    outbox.ended(second)
    outbox.close()
    assert sends == [(["j1"], ["j2"])]
