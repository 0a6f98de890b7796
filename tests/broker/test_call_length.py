"""No single Redis call carries a whole big operation (issue: one ``delay_many`` held Redis for seconds).

Redis runs one command at a time: while a script runs, every other client
waits. One ``delay_many`` of 250,000 jobs was one script call of 3.9 s, and
a group of 50,000 members one of 885 ms. Timings are the benchmarks' job
(``benchmarks/slowlog.py`` quotes the longest call against the 50 ms
budget); this test asks what holds on any machine, with the public API
only: the operation's Redis time is spread over many calls, none of which
takes a large share of it. Each call's time is the server's own, from a
``SLOWLOG`` that logs every command, on a server of this test's own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
import redis

from taskforge import TaskForge, group
from taskforge.broker.keys import QueueKeys

SCRIPT_COMMANDS = (b"EVALSHA", b"EVAL", b"FCALL", b"evalsha", b"eval", b"fcall")


@pytest.fixture
def server(own_redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(own_redis_url)
    client.config_set("slowlog-log-slower-than", 0)  # every command, with its time
    client.config_set("slowlog-max-len", 100_000)
    yield client
    client.close()


def script_calls(client: redis.Redis, run: Callable[[], object]) -> list[int]:
    """The server's time in µs of each script call ``run`` made, in order."""
    client.slowlog_reset()
    run()
    entries = client.slowlog_get(100_000)
    assert len(entries) < 100_000, "the log overflowed: raise slowlog-max-len"
    times = [int(e["duration"]) for e in reversed(entries) if e["command"].split(b" ", 1)[0] in SCRIPT_COMMANDS]
    assert times, "no script call was logged"
    return times


def assert_spread(client: redis.Redis, run: Callable[[], object], what: str) -> None:
    """``run``'s script calls are many, and none takes more than a quarter of their time.

    A slice is about 1/80 of the whole here; a quarter leaves room for a call
    that a busy machine stretched, and none for a call doing it all. A
    server starved of CPU (the niced server matrix beside the suite) once
    stretched one call to 26%: a stretch is transient, a call doing it all is
    not, so a miss is measured once more, on an emptied database.
    """
    for attempt in range(2):
        if attempt:
            client.flushdb()
        times = script_calls(client, run)
        total, longest = sum(times), max(times)
        assert len(times) >= 10, f"{what}: {len(times)} script call(s), {total} µs in all"
        if longest <= total / 4:
            return
    raise AssertionError(f"{what}: longest call {longest} µs of {total} µs over {len(times)} calls, twice")


def test_a_big_delay_many_is_many_short_calls(own_redis_url: str, server: redis.Redis) -> None:
    app = TaskForge("calls", broker=own_redis_url)

    @app.task
    def noop(n: int) -> int:
        return n

    assert_spread(server, lambda: noop.delay_many([(i,) for i in range(20_000)]), "delay_many of 20,000 jobs")
    assert server.zcard(QueueKeys("default").pending) == 20_000


def test_a_big_group_is_many_short_calls(own_redis_url: str, server: redis.Redis) -> None:
    app = TaskForge("calls", broker=own_redis_url)

    @app.task
    def noop(n: int) -> int:
        return n

    assert_spread(server, lambda: group(noop.s(i) for i in range(10_000)).delay(), "a group of 10,000 members")
