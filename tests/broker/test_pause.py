"""Pausing a queue (docs/howto/scheduling.md, "Pausing a queue"): held in Redis, read by every claim and peek."""

from __future__ import annotations

import asyncio

import pytest

from taskforge import ConfigurationError, JobState, TaskForge


def test_a_paused_queue_starts_nothing_and_still_takes_jobs(app: TaskForge) -> None:
    @app.task
    def noop(n: int) -> int:
        return n

    app.pause("default")
    handles = [noop.delay(n) for n in range(3)]  # enqueueing still works
    assert app.drain() == []  # nothing starts
    assert [h.status() for h in handles] == [JobState.PENDING] * 3
    assert app.broker.claims.dequeue("default", 60_000, count=4)[0] == []
    assert [head.score for head in app.broker.claims.peek(["default"])] == [None]
    app.resume("default")
    assert [job.result for job in app.drain()] == [0, 1, 2]


def test_pause_and_resume_say_whether_anything_changed_and_paused_lists_the_queues(app: TaskForge) -> None:
    flow = app.broker.flow
    assert app.paused() == set()
    assert flow.pause("mail") is True
    assert flow.pause("mail") is False  # already paused
    app.pause("reports")
    # Listed though no job was ever sent to them.
    assert app.paused() == {"mail", "reports"}
    assert "mail" in app.broker.jobs.queues()
    assert flow.resume("mail") is True
    assert flow.resume("mail") is False
    assert app.paused() == {"reports"}


def test_a_scheduled_job_that_falls_due_while_paused_waits_for_resume(app: TaskForge) -> None:
    @app.task
    def later() -> str:
        return "ran"

    handle = later.apply_in(60)
    app.pause("default")
    assert app.drain(advance=120) == []
    app.resume("default")
    assert [job.id for job in app.drain()] == [handle.id]


def test_the_async_twins_do_the_same(app: TaskForge) -> None:
    @app.task
    def noop() -> None:
        return None

    async def main() -> set[str]:
        await app.apause("default")
        await noop.adelay()
        assert await app.apaused() == {"default"}
        assert app.paused() == {"default"}  # the same key, seen by the sync side
        await app.aresume("default")
        paused = await app.apaused()
        await app.aclose()
        return paused

    assert asyncio.run(main()) == set()
    assert len(app.drain()) == 1


@pytest.mark.parametrize("name", ["", "a{b", "two words"])
def test_a_bad_queue_name_is_refused_and_nothing_is_stored(app: TaskForge, name: str) -> None:
    with pytest.raises(ConfigurationError, match="queue name"):
        app.pause(name)
    assert app.paused() == set()
    assert app.broker.jobs.queues() == []


def test_a_queue_handle_pauses_resumes_and_says_whether_it_changed(app: TaskForge) -> None:
    mail = app.queue("mail")
    assert mail == app.queue("mail") and mail != app.queue("reports") and mail.name == "mail"
    assert mail.paused() is False
    assert mail.pause() is True and mail.pause() is False  # already paused
    assert mail.paused() is True and app.paused() == {"mail"}
    assert app.queue("reports").paused() is False
    app.resume("mail")  # the app's methods and the handle's are one pause
    assert mail.paused() is False and mail.resume() is False


def test_a_queue_handles_async_twins_share_the_key(app: TaskForge) -> None:
    mail = app.queue("mail")

    async def main() -> list[bool]:
        seen = [await mail.apause(), await mail.apaused(), mail.paused(), await mail.aresume(), await mail.apaused()]
        await app.aclose()
        return seen

    assert asyncio.run(main()) == [True, True, True, True, False]


@pytest.mark.parametrize("name", ["", "a{b", "two words"])
def test_a_queue_handle_checks_its_name_before_anything_is_sent(app: TaskForge, name: str) -> None:
    with pytest.raises(ConfigurationError, match="queue name"):
        app.queue(name)
    assert app.broker.jobs.queues() == []
