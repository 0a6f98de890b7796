"""New job ids: valid UUID version 7 hex, strictly increasing within a process, never repeated."""

from __future__ import annotations

import threading
import uuid

from taskforge import TaskForge
from taskforge.job_ids import new_job_id


def test_ids_are_uuid7_hex_and_increase() -> None:
    ids = [new_job_id() for _ in range(20_000)]  # more than 4,096 within one ms, most likely
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    for job_id in ids[::1000]:
        parsed = uuid.UUID(job_id)
        assert parsed.version == 7 and parsed.hex == job_id and len(job_id) == 32


def test_threads_never_share_an_id() -> None:
    made: list[list[str]] = [[] for _ in range(4)]

    def make(into: list[str]) -> None:
        into.extend(new_job_id() for _ in range(5_000))

    threads = [threading.Thread(target=make, args=(into,)) for into in made]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    every = [i for into in made for i in into]
    assert len(set(every)) == len(every)
    assert all(into == sorted(into) for into in made)


def test_a_jobs_id_is_one_and_a_caller_chosen_id_is_kept() -> None:
    app = TaskForge("ids", broker="memory://")

    @app.task
    def noop() -> None: ...

    first, second = noop.delay(), noop.delay()
    assert uuid.UUID(first.id).version == 7 and first.id < second.id
    assert noop.with_options(job_id="order-42").delay().id == "order-42"
