"""``@app.periodic``'s own options: stacked on ``@app.task`` it says how to write it, and ``catch_up=False``."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from taskforge import ConfigurationError, TaskForge
from taskforge.periodic import Scheduler


def test_periodic_stacked_on_task_names_the_way_to_give_options(app: TaskForge) -> None:
    with pytest.raises(ConfigurationError) as raised:

        @app.periodic(every=60)
        @app.task(queue="reports")
        def nightly() -> None: ...

    message = str(raised.value)
    assert "@app.periodic(every=..., queue=...)" in message and "without @app.task" in message
    assert "pass name=" not in message


def test_task_stacked_on_periodic_names_the_way_to_give_options(app: TaskForge) -> None:
    with pytest.raises(ConfigurationError) as raised:

        @app.task(queue="reports")
        @app.periodic(every=60)
        def nightly() -> None: ...

    message = str(raised.value)
    assert "@app.periodic(every=..., queue=...)" in message and "without @app.task" in message
    assert "pass name=" not in message


def test_task_twice_says_the_function_is_a_task_already(app: TaskForge) -> None:
    with pytest.raises(ConfigurationError, match="already a task"):

        @app.task
        @app.task
        def twice() -> None: ...


def test_catch_up_false_skips_the_tick_before_the_start(app: TaskForge) -> None:
    @app.periodic(every=60, catch_up=False)
    def minutely() -> None: ...

    scheduler = Scheduler(app.schedules)
    noon = datetime(2030, 1, 1, 12, 0, 30, tzinfo=timezone.utc)
    assert scheduler.run_due(noon) == 0  # 12:00 came before the start: not enqueued
    assert scheduler.run_due(noon.replace(minute=1)) == 1  # 12:01, the first tick after it
    with pytest.raises(ConfigurationError, match="catch_up"):
        app.periodic(every=60, catch_up="no")(lambda: None)  # type: ignore[arg-type]
