"""The RQ, Dramatiq and Huey landing pads (docs/tutorials/coming-from.md), through ``app.drain()``.

Each spelling either works with the same meaning (Dramatiq's ``send`` and
``send_with_options``, RQ's ``queue.enqueue``, ``enqueue_in`` and
``enqueue_at``: the job is checked where it landed) or raises an error whose
message names the taskforge way (``Job.fetch``, ``depends_on=``, Huey's
``periodic_task`` and ``lock_task``, the other queues' task options). The
Celery pad is ``tests/test_celery_landing.py``.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone

import pytest

from taskforge import JobHandle, JobState, Priority, TaskForge


@pytest.fixture
def add(app: TaskForge):
    @app.task(name="add")
    def add(a: int, b: int = 0) -> int:
        return a + b

    return add


def due_in(handle: JobHandle[int]) -> timedelta:
    due = handle.info().scheduled_at
    assert handle.status() is JobState.SCHEDULED and due is not None
    return due - datetime.now(timezone.utc)


# -- Dramatiq: send and send_with_options ---------------------------------------


def test_send_is_delay(app: TaskForge, add) -> None:
    handle = add.send(1, b=2)
    info = handle.info()
    assert (info.args, info.kwargs, info.state, info.queue) == ((1,), {"b": 2}, JobState.PENDING, "default")
    app.drain()
    assert handle.result(timeout=5) == 3


def test_send_with_options_maps_args_kwargs_and_delay_in_ms(app: TaskForge, add) -> None:
    later = add.send_with_options(args=(1,), kwargs={"b": 2}, delay=60_000)
    assert (later.info().args, later.info().kwargs) == ((1,), {"b": 2})
    assert timedelta(seconds=50) < due_in(later) <= timedelta(seconds=61)
    now = add.send_with_options(args=[4], queue="mail", priority="high", job_id="sum-4")
    info = now.info()
    assert (now.id, info.queue, info.priority, info.state) == ("sum-4", "mail", Priority.HIGH, JobState.PENDING)


def test_send_with_options_checks_the_call_and_its_arguments(app: TaskForge, add) -> None:
    with pytest.raises(TypeError, match="the job was not queued"):
        add.send_with_options(kwargs={"c": 1})
    with pytest.raises(TypeError, match=r"add\.send_with_options\(args=1\): args is a tuple or list"):
        add.send_with_options(args=1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"kwargs is a dict"):
        add.send_with_options(args=(1,), kwargs=[("b", 2)])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"add\.send_with_options\(delay=\.\.\.\): milliseconds"):
        add.send_with_options(args=(1,), delay="soon")  # type: ignore[arg-type]
    assert app.drain() == []


@pytest.mark.parametrize(
    ("option", "hint"),
    [
        ("max_retries", "max_attempts=N"),
        ("time_limit", "timeout=seconds"),
        ("min_backoff", "backoff="),
        ("on_failure", "on_failure="),
        ("on_success", "chain("),
        ("pipe_ignore", ".si("),
        ("retry_when", "retry_on="),
    ],
)
def test_send_with_options_refuses_dramatiq_options_naming_the_taskforge_way(
    app: TaskForge, add, option: str, hint: str
) -> None:
    with pytest.raises(TypeError, match=r"add\.send_with_options\(\): " + option + "=") as caught:
        add.send_with_options(args=(1,), **{option: 1})
    assert hint in str(caught.value) and "a Dramatiq option" in str(caught.value)
    with pytest.raises(TypeError, match="unexpected keyword argument.*'colour'"):
        add.send_with_options(args=(1,), colour="red")
    assert app.drain() == []


def test_asend_and_asend_with_options(app: TaskForge, add) -> None:
    async def go() -> tuple[JobHandle[int], JobHandle[int]]:
        try:
            return await add.asend(2, 3), await add.asend_with_options(args=(1,), delay=30_000)
        finally:
            await app.aclose()

    now, later = asyncio.run(go())
    assert timedelta(seconds=20) < due_in(later) <= timedelta(seconds=31)
    app.drain()
    assert now.result(timeout=5) == 5


# -- RQ: a queue's enqueue, enqueue_in, enqueue_at; Job.fetch; depends_on ------


def test_queue_enqueue_sends_a_task_to_that_queue(app: TaskForge, add) -> None:
    mail = app.queue("mail")
    now = mail.enqueue(add, 1, b=2)
    assert (now.info().queue, now.info().state, now.info().kwargs) == ("mail", JobState.PENDING, {"b": 2})
    later = mail.enqueue_in(timedelta(seconds=60), add, 2)
    assert later.info().queue == "mail" and timedelta(seconds=50) < due_in(later) <= timedelta(seconds=61)
    when = datetime(2030, 1, 1, tzinfo=timezone.utc)
    at = mail.enqueue_at(when, add, 3)
    assert (at.info().queue, at.info().scheduled_at) == ("mail", when)
    by_name = mail.enqueue("add", 5)  # RQ takes a function's dotted name too: the task's name here
    assert (by_name.info().task, by_name.info().queue) == ("add", "mail")
    assert add.queue == "default"  # the task itself is unchanged
    app.drain()
    assert now.result(timeout=5) == 3 and by_name.result(timeout=5) == 5


def test_queue_enqueue_of_a_plain_function_names_app_task(app: TaskForge) -> None:
    def plain(a: int) -> int:
        return a

    for call in (
        lambda: app.queue("mail").enqueue(plain, 1),
        lambda: app.queue("mail").enqueue_in(10, plain, 1),
        lambda: app.queue("mail").enqueue_at(datetime.now(timezone.utc), plain, 1),
    ):
        with pytest.raises(TypeError, match=r"not a task: register it with @app\.task") as caught:
            call()
        assert "plain.delay(...)" in str(caught.value)
    assert app.drain() == []


def test_queue_enqueue_refuses_rq_job_options_naming_the_taskforge_way(app: TaskForge, add) -> None:
    with pytest.raises(TypeError, match=r"add: job_timeout=: .*timeout=seconds.*an RQ option") as caught:
        app.queue("default").enqueue(add, 1, job_timeout=30)
    assert "the job was not queued" in str(caught.value)
    with pytest.raises(TypeError, match=r"with_options\(job_id="):
        add.delay(1, job_id="x")
    assert app.drain() == []


def test_depends_on_given_to_delay_names_the_taskforge_way(app: TaskForge, add) -> None:
    first = add.delay(1)
    for call in (
        lambda: add.delay(2, depends_on=first),
        lambda: add.apply_in(5, 2, depends_on=[first]),
        lambda: app.queue("default").enqueue(add, 2, depends_on=first),
        lambda: app.send("elsewhere.report", depends_on=first),  # by name: **kwargs, but a handle cannot travel
    ):
        with pytest.raises(TypeError, match=r"depends_on=: .*apply_async\(\(...\), depends_on=") as caught:
            call()
        assert "the job was not queued" in str(caught.value)
    assert [info.id for info in app.drain()] == [first.id]


def test_a_task_with_a_depends_on_parameter_takes_it(app: TaskForge) -> None:
    @app.task(name="plan")
    def plan(step: str, depends_on: str = "") -> str:
        return f"{step} after {depends_on}"

    @app.task(name="loose")
    def loose(**fields: str) -> dict[str, str]:
        return fields

    handle, free = plan.delay("b", depends_on="a"), loose.delay(depends_on="a", ttl="5")
    app.drain()
    assert handle.result(timeout=5) == "b after a" and free.result(timeout=5) == {"depends_on": "a", "ttl": "5"}


def test_job_fetch_and_rq_names_name_app_job(app: TaskForge, add) -> None:
    with pytest.raises(TypeError, match=r"JobHandle\.fetch\(\): .*app\.job\(job_id\)"):
        JobHandle.fetch("some-id", connection=None)
    with pytest.raises(ImportError, match=r"an RQ name.*app\.job\(job_id\)"):
        from taskforge import Job  # noqa: F401
    with pytest.raises(ImportError, match=r"current_job\(\)"):
        from taskforge import get_current_job  # noqa: F401
    with pytest.raises(AttributeError, match=r"app\.job\(job_id\)"):
        app.queue("default").fetch_job("some-id")  # type: ignore[attr-defined]
    with pytest.raises(AttributeError, match=r"app\.queue\('default'\)\.enqueue_in"):
        app.enqueue_in(timedelta(seconds=5), add, 1)  # type: ignore[attr-defined]
    handle = add.delay(1)
    with pytest.raises(AttributeError, match=r"an RQ name\): handle\.status\(\)"):
        handle.get_status()  # type: ignore[attr-defined]
    with pytest.raises(AttributeError, match=r"object has no attribute 'stauts'$"):
        _ = app.queue("default").stauts  # type: ignore[attr-defined]


# -- Huey: periodic_task, lock_task, task options; a plain call runs inline -----


def test_huey_decorators_name_the_taskforge_way(app: TaskForge) -> None:
    with pytest.raises(AttributeError, match=r"\(a Huey name\): @app\.periodic\(cron="):
        app.periodic_task("*/5 * * * *")  # type: ignore[attr-defined]
    with pytest.raises(AttributeError, match=r"\(a Huey name\): .*concurrency=1.*app\.limit\('name', concurrency=1\)"):
        app.lock_task("reports")  # type: ignore[attr-defined]
    with pytest.raises(AttributeError, match=r"set_eager"):
        app.immediate = True  # type: ignore[attr-defined]
    assert not hasattr(app, "immediate")


@pytest.mark.parametrize(
    ("option", "hint"),
    [
        ("retries", "max_attempts=N"),
        ("retry_delay", "backoff="),
        ("context", "current_job()"),
        ("queue_name", "queue="),
        ("actor_name", "name="),
        ("min_backoff", "backoff="),
        ("throws", "dont_retry_on="),
    ],
)
def test_other_task_options_name_the_taskforge_way(app: TaskForge, option: str, hint: str) -> None:
    with pytest.raises(TypeError, match=rf"@app\.task: {option}=: ") as caught:
        app.task(**{option: 1})  # type: ignore[call-overload]
    assert hint in str(caught.value)
    assert app.tasks == {}


def test_huey_task_methods_name_the_taskforge_way(app: TaskForge, add) -> None:
    with pytest.raises(AttributeError, match=r"\(a Huey name\): add\.apply_in\(seconds"):
        add.schedule(args=(1, 2), delay=30)  # type: ignore[attr-defined]
    with pytest.raises(AttributeError, match=r"runs inline"):
        add.call_local(1, 2)  # type: ignore[attr-defined]
    assert add(1, 2) == 3 and app.drain() == []  # a plain call runs inline: nothing is queued


def test_the_tables_cover_what_the_docs_promise() -> None:
    from taskforge.other_names import APP, CALL, HANDLE, MODULE, OPTIONS, SEND_OPTIONS, TASK

    assert {"Job", "Queue", "get_current_job", "actor"} <= set(MODULE)
    assert {"periodic_task", "lock_task", "enqueue", "enqueue_in", "enqueue_at"} <= set(APP)
    assert {"get_status", "return_value", "get_result"} <= set(HANDLE)
    assert {"schedule", "call_local", "send_with_options"}.isdisjoint(OPTIONS) and "schedule" in TASK
    assert {"max_retries", "time_limit", "on_failure", "pipe_ignore"} <= set(SEND_OPTIONS)
    assert {"retries", "retry_delay", "queue_name"} <= set(OPTIONS) and {"depends_on", "job_timeout"} <= set(CALL)
    for table in (MODULE, APP, HANDLE, TASK, OPTIONS, SEND_OPTIONS, CALL):
        assert all(origin in {"RQ", "Dramatiq", "Huey"} for origin, _ in table.values())
