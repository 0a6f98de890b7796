"""Arguments a task cannot take are refused at delay(), before anything is stored."""

from __future__ import annotations

import pytest

from taskforge import TaskForge


def stored(app: TaskForge, queue: str = "default") -> int:
    counts = app.broker.inspection.counts(queue)
    return counts["pending"] + counts["scheduled"]


def test_too_many_too_few_or_unknown_arguments_raise_and_store_nothing(app: TaskForge) -> None:
    @app.task(name="mail.send")
    def send(to: str, subject: str = "hello") -> str:
        return to

    for call in (
        lambda: send.delay(),
        lambda: send.delay("a", "b", "c"),
        lambda: send.delay("a", body="x"),
        lambda: send.apply_in(60, "a", "b", "c"),
        lambda: send.with_options(queue="other").delay(),
    ):
        with pytest.raises(TypeError, match=r"^mail\.send: .*; the job was not queued$"):
            call()
    assert stored(app) == 0 and stored(app, "other") == 0
    send.delay("a", subject="hi")
    assert stored(app) == 1


def test_a_bad_call_in_delay_many_stores_none_of_them(app: TaskForge) -> None:
    @app.task
    def add(a: int, b: int) -> int:
        return a + b

    with pytest.raises(TypeError, match="missing a required argument: 'b'"):
        add.delay_many([(1, 2), (3,), (5, 6)])
    assert stored(app) == 0


def test_what_python_would_accept_is_accepted(app: TaskForge) -> None:
    @app.task
    def anything(*args: object, **kwargs: object) -> None: ...

    @app.task
    def keyword_only(*, when: str) -> None: ...

    anything.delay(1, 2, x=3)
    keyword_only.delay(when="now")
    with pytest.raises(TypeError):
        keyword_only.delay("now")
    app.send("elsewhere.defined", 1, 2, 3)  # sent by name: no function here to check against
    assert stored(app) == 3
