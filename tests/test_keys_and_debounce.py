"""A job's key and debounced tasks (docs/howto/keys.md), on memory:// and real Redis."""

from __future__ import annotations

import threading

import pytest
import redis

from taskforge import ConfigurationError, JobState, TaskForge
from taskforge.broker.keys import QueueKeys


def test_the_key_is_an_arguments_value_as_text_or_what_with_options_says(app: TaskForge) -> None:
    @app.task(key="account_id")
    def sync_account(account_id: int, full: bool = False) -> None:
        return None

    @app.task(key="region")
    def by_default(region: str = "eu") -> None:
        return None

    @app.task
    def keyless() -> None:
        return None

    assert sync_account.delay(42).info().key == "42"
    assert sync_account.delay(account_id=7, full=True).info().key == "7"
    assert sync_account.with_options(key="vip-42").delay(42).info().key == "vip-42"
    assert by_default.delay().info().key == "eu"  # the default of a parameter left out
    assert keyless.delay().info().key is None
    assert keyless.with_options(key="k").delay().info().key == "k"


def test_a_key_callable_gets_the_calls_arguments_and_its_mistakes_store_nothing(app: TaskForge) -> None:
    @app.task(key=lambda doc_id, **_: f"doc:{doc_id}")
    def reindex(doc_id: int, reason: str = "") -> None:
        return None

    assert reindex.delay(3, reason="edit").info().key == "doc:3"

    @app.task(key=lambda n: 1 / n)
    def raises(n: int) -> None:
        return None

    @app.task(key=lambda n: n)
    def not_text(n: int) -> None:
        return None

    before = app.broker.inspection.counts("default")
    with pytest.raises(ConfigurationError, match="key= callable raised ZeroDivisionError"):
        raises.delay(0)
    with pytest.raises(ConfigurationError, match="key= callable returned 5"):
        not_text.delay(5)
    empty = app.task(name="empty", key=lambda: "")(lambda: None)
    with pytest.raises(ConfigurationError, match="key= callable returned ''"):
        empty.delay()
    assert app.broker.inspection.counts("default") == before


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"key": "nosuch"}, "key='nosuch' is not a parameter of the task"),
        ({"key": 5}, "key=5: use the name of one of the task's parameters"),
        ({"key": ""}, "key='': use the name"),
        ({"debounce": 0}, "debounce=0: use a number of seconds > 0"),
        ({"debounce": "5"}, "debounce='5'"),
        ({"debounce": 5, "debounce_max_wait": 2}, "debounce_max_wait=2 is below debounce=5"),
        ({"debounce_max_wait": 10}, "debounce_max_wait= without debounce="),
    ],
)
def test_bad_key_and_debounce_options_fail_at_decoration(options: dict, message: str) -> None:
    app = TaskForge("bad", broker="memory://")
    with pytest.raises(ConfigurationError, match=message.replace("(", r"\(").replace(")", r"\)")):

        @app.task(**options)
        def task(account_id: int) -> None:
            return None


def test_with_options_key_must_be_a_non_empty_string(app: TaskForge) -> None:
    @app.task
    def noop() -> None:
        return None

    for bad in ("", 42):
        with pytest.raises(ConfigurationError, match="with_options"):
            noop.with_options(key=bad)  # type: ignore[arg-type]


def test_a_burst_of_calls_for_one_key_is_one_job_with_the_last_arguments(app: TaskForge) -> None:
    @app.task(key="doc_id", debounce=30)
    def reindex(doc_id: int, reason: str = "") -> str:
        return f"{doc_id}:{reason}"

    first = reindex.delay(1, reason="a")
    assert first.status() is JobState.SCHEDULED
    assert reindex.delay(1, reason="b") == first
    assert reindex.delay(1, reason="c") == first
    other = reindex.delay(2, reason="x")  # another key: another burst
    assert other != first
    assert first.info().kwargs == {"reason": "c"}
    assert app.drain() == []  # not due yet
    ran = app.drain(advance=31)
    assert sorted(job.result for job in ran) == ["1:c", "2:x"]
    again = reindex.delay(1, reason="d")  # the burst's job ran: a new burst
    assert again != first and again.status() is JobState.SCHEDULED


def test_each_call_moves_the_start_but_never_past_the_cap(app: TaskForge) -> None:
    @app.task(key="doc_id", debounce=10, debounce_max_wait=10)
    def reindex(doc_id: int, n: int) -> int:
        return n

    handle = reindex.delay(1, 1)
    fields = app.broker.jobs.read("default", handle.id)
    assert fields is not None
    first = int(fields[b"debounce_first"])
    assert int(fields[b"scheduled_at"]) - first == 10_000
    assert reindex.delay(1, 2) == handle
    # now + 10 s is past the first call + 10 s: the cap holds the start where it was.
    assert int(app.broker.jobs.read("default", handle.id)[b"scheduled_at"]) == first + 10_000  # type: ignore[index]
    assert [job.result for job in app.drain(advance=11)] == [2]


def test_a_due_job_not_yet_started_is_still_the_bursts(app: TaskForge) -> None:
    @app.task(key="doc_id", debounce=5)
    def reindex(doc_id: int, n: int) -> int:
        return n

    handle = reindex.delay(1, 1)
    app.broker.claims.fast_forward("default", 6)
    app.broker.claims.peek(["default"])  # promoted: pending, not started
    assert handle.status() is JobState.PENDING
    assert reindex.delay(1, 2) == handle
    assert handle.status() is JobState.SCHEDULED  # its start moved again
    assert [job.result for job in app.drain(advance=6)] == [2]


@pytest.mark.redis
def test_two_producers_at_once_make_one_job_and_the_last_call_wins(redis_url: str) -> None:
    apps = [TaskForge("p", broker=redis_url) for _ in range(2)]
    tasks = [a.task(name="debounced.reindex", key="doc_id", debounce=30)(lambda doc_id, n: n) for a in apps]
    ids: list[str] = []

    def produce(task, start: int) -> None:
        ids.extend(task.delay(9, n).id for n in range(start, start + 50))

    threads = [threading.Thread(target=produce, args=(task, 100 * i)) for i, task in enumerate(tasks)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    last = tasks[0].delay(9, "last")
    assert set(ids) == {last.id} and len(ids) == 100
    assert last.info().args == (9, "last")
    client = redis.Redis.from_url(redis_url)
    assert client.zcard(QueueKeys("default").scheduled) == 1
