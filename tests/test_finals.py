"""The final-transition seam (``taskforge/finals.py``): who hears a job's end, and that none can fail it."""

from __future__ import annotations

from typing import Any

from taskforge import JobState, TaskForge
from taskforge.finals import Finals, FinalTransition
from taskforge.workflows.reports import NAME, StepReports


class Heard:
    """A listener that keeps what it was told (and raises, when asked to)."""

    def __init__(self, fail: bool = False) -> None:
        self.told: list[FinalTransition] = []
        self.fail = fail

    def ended(self, broker: Any, transition: FinalTransition) -> None:
        self.told.append(transition)
        if self.fail:
            raise RuntimeError("a listener's own bug")

    async def aended(self, broker: Any, transition: FinalTransition) -> None:
        self.ended(broker, transition)


def app_with(listener: Heard, steps_only: bool = False) -> TaskForge:
    app = TaskForge("finals", broker="memory://")
    app.finals.listen("heard", listener, steps_only=steps_only)
    return app


def test_every_app_registers_workflows_for_steps_only() -> None:
    app = TaskForge("finals", broker="memory://")
    assert app.finals.every == () and [type(each) for each in app.finals.steps] == [StepReports]


def test_a_listener_for_every_job_hears_each_final_transition_in_drain() -> None:
    heard = Heard()
    app = app_with(heard)

    @app.task(max_attempts=1)
    def work(fail: bool) -> int:
        if fail:
            raise ValueError("no")
        return 7

    ok, bad = work.delay(False), work.delay(True)
    app.drain()
    by_id = {t.job_id: t for t in heard.told}
    assert (by_id[ok.id].state, by_id[ok.id].workflow, by_id[ok.id].result) == ("succeeded", "", b"\x07")
    assert by_id[bad.id].state == "dead" and by_id[bad.id].error.startswith("ValueError: no")
    assert len(heard.told) == 2


def test_a_steps_only_listener_is_not_told_of_a_plain_job() -> None:
    heard = Heard()
    app = app_with(heard, steps_only=True)

    @app.task
    def work() -> None:
        return None

    work.delay()
    app.drain()
    assert heard.told == []


def test_a_listener_that_raises_changes_nothing_for_the_job_or_the_hooks() -> None:
    heard = Heard(fail=True)
    app = app_with(heard)
    seen: list[str] = []
    app.on("job_succeeded")(lambda event: seen.append(event.job.id))

    @app.task
    def work() -> int:
        return 1

    handle = work.delay()
    app.drain()
    assert handle.status() is JobState.SUCCEEDED and seen == [handle.id] and len(heard.told) == 1


def test_a_cancel_tells_the_listeners_with_the_id_only() -> None:
    heard = Heard()
    app = app_with(heard)

    @app.task
    def work() -> None:
        return None

    handle = work.apply_in(60)
    assert handle.cancel() is True
    assert heard.told == [FinalTransition(handle.queue, handle.id, "cancelled")]  # workflow None: read the record
    assert handle.cancel() is False and len(heard.told) == 1  # no transition, nobody told


def test_replaced_swaps_one_listener_and_keeps_its_kind() -> None:
    finals, first, second, courier = Finals(), Heard(), Heard(), Heard()
    finals.listen("first", first)
    finals.listen(NAME, second, steps_only=True)
    copy = finals.replaced(NAME, courier)
    assert copy.every == (first,) and copy.steps == (first, courier)
    assert finals.steps == (first, second), "the original is left as it was"
