"""The Celery landing pad on jobs (docs/tutorials/coming-from.md), through ``app.drain()``.

``apply_async`` and ``get`` as Celery spells them, ``TaskFailed.error_type``,
``Retry(exc=)``, progress ``meta``, a task raising ``SystemExit`` recorded as
its own failure, and the Celery spellings taskforge does not have: each
raises an error that names the taskforge way. The same through a real
worker: ``tests/worker/test_error_type.py``.
"""

from __future__ import annotations

import asyncio
import importlib
from datetime import datetime, timedelta, timezone

import pytest

import taskforge
from taskforge import JobState, Priority, Retry, SerializationError, TaskFailed, TaskForge, current_job
from taskforge.celery_names import APP, HANDLE, MODULE, OPTIONS, TASK


@pytest.fixture
def add(app: TaskForge):
    @app.task(name="add")
    def add(a: int, b: int = 0) -> int:
        return a + b

    return add


# -- apply_async and get --------------------------------------------------------


def test_apply_async_maps_each_celery_option(app: TaskForge, add) -> None:
    now = add.apply_async(args=(1,), kwargs={"b": 2}, queue="mail", priority="high", task_id="sum-1")
    assert (now.id, now.queue) == ("sum-1", "mail")
    info = now.info()
    assert (info.args, info.kwargs, info.priority, info.state) == ((1,), {"b": 2}, Priority.HIGH, JobState.PENDING)
    later = add.apply_async((2, 3), countdown=60)
    due = later.info().scheduled_at
    assert later.status() is JobState.SCHEDULED and due is not None
    assert timedelta(seconds=50) < due - datetime.now(timezone.utc) <= timedelta(seconds=61)
    when = datetime(2030, 1, 1, tzinfo=timezone.utc)
    at = add.apply_async([4], eta=when)
    assert at.info().scheduled_at == when
    ran = app.drain()
    assert [info.id for info in ran] == ["sum-1"] and now.get(timeout=5) == 3


def test_apply_async_without_args_checks_the_call(app: TaskForge, add) -> None:
    with pytest.raises(TypeError, match="the job was not queued"):
        add.apply_async()


def test_get_is_result(app: TaskForge, add) -> None:
    handle = add.apply_async(args=(2, 3))
    app.drain()
    assert handle.get(timeout=5) == 5 == handle.result(timeout=5)
    with pytest.raises(TypeError, match="propagate=: a dead or cancelled job always raises TaskFailed"):
        handle.get(propagate=False)  # type: ignore[arg-type]


def test_the_async_twins(app: TaskForge, add) -> None:
    async def go() -> int:
        handle = await add.aapply_async(args=(4,), kwargs={"b": 5}, task_id="async-sum")
        assert handle.id == "async-sum"
        await app.adrain()
        try:
            value: int = await handle.aget(timeout=5)
        finally:
            await app.aclose()
        return value

    assert asyncio.run(go()) == 9


@pytest.mark.parametrize(
    ("option", "hint"),
    [
        ("expires", "with_options(expires=...)"),
        ("link", "chain(task.s(...), next.s())"),
        ("link_error", "on_failure="),
        ("serializer", "msgpack"),
        ("retry", "job_id="),
        ("routing_key", "queue="),
    ],
)
def test_apply_async_refuses_other_options_naming_the_taskforge_way(app: TaskForge, add, option, hint) -> None:
    with pytest.raises(TypeError, match=r"add\.apply_async\(\): " + option + "=") as caught:
        add.apply_async(args=(1,), **{option: 1})
    assert hint in str(caught.value)
    assert app.drain() == []  # nothing was stored


def test_apply_async_refuses_bad_args_countdown_and_eta_together(app: TaskForge, add) -> None:
    with pytest.raises(TypeError, match="args is a tuple or list"):
        add.apply_async(args=1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="kwargs is a dict"):
        add.apply_async(args=(1,), kwargs=[("b", 2)])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="countdown= and eta= together"):
        add.apply_async(args=(1,), countdown=1, eta=datetime.now(timezone.utc))
    assert app.drain() == []


def test_apply_async_names_countdown_or_eta_in_a_bad_value(app: TaskForge, add) -> None:
    """The error says which argument of apply_async was wrong, not only apply_in/apply_at's words."""
    with pytest.raises(ValueError, match=r"add\.apply_async\(countdown=\.\.\.\): apply_in\(\) needs a timedelta"):
        add.apply_async((1,), countdown="soon")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"add\.apply_async\(eta=\.\.\.\): apply_at\(\) needs a datetime"):
        add.apply_async((1,), eta="tomorrow")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"add\.apply_async\(countdown=\.\.\.\): .*~100 years"):
        asyncio.run(add.aapply_async((1,), countdown=1e12))
    assert app.drain() == []


# -- error_type, Retry(exc=), SystemExit ---------------------------------------


class PaymentDeclined(Exception):
    pass


def test_task_failed_carries_the_class_path_of_the_remote_error(app: TaskForge) -> None:
    @app.task(name="pay", max_attempts=1)
    def pay() -> None:
        raise PaymentDeclined("card 42")

    handle = pay.delay()
    app.drain()
    with pytest.raises(TaskFailed) as caught:
        handle.get(timeout=5)
    path = caught.value.error_type
    assert path == f"{__name__}.PaymentDeclined" and caught.value.error == "PaymentDeclined: card 42"
    module, _, name = path.rpartition(".")
    assert getattr(importlib.import_module(module), name) is PaymentDeclined
    assert handle.info().error_type == path and handle.info().to_dict()["error_type"] == path


def test_retry_with_exc_records_that_error(app: TaskForge) -> None:
    @app.task(name="fetch", max_attempts=2)
    def fetch() -> None:
        try:
            raise ConnectionError("upstream down")
        except ConnectionError as err:
            raise Retry(after=0, exc=err) from err

    handle = fetch.delay()
    app.drain()
    info = handle.info()
    assert (info.state, info.error, info.error_type) == (
        JobState.DEAD,
        "ConnectionError: upstream down",
        "builtins.ConnectionError",
    )
    assert info.traceback is not None and "ConnectionError: upstream down" in info.traceback
    assert info.attempts == 2  # Retry(after=0) asked again once, then max_attempts ended it


def test_retry_without_exc_keeps_its_own_error(app: TaskForge) -> None:
    @app.task(name="later", max_attempts=1)
    def later() -> None:
        raise Retry(after=0)

    handle = later.delay()
    app.drain()
    info = handle.info()
    assert info.error is not None and info.error.startswith("Retry: ")
    assert info.error_type == "taskforge.errors.Retry"


def test_retry_exc_must_be_an_exception() -> None:
    with pytest.raises(ValueError, match="use the exception the task caught"):
        Retry(after=1, exc="boom")  # type: ignore[arg-type]


@pytest.mark.parametrize("error", [SystemExit(2), KeyboardInterrupt()])
def test_system_exit_in_a_sync_task_is_its_failure(app: TaskForge, error: BaseException) -> None:
    @app.task(name="quits", max_attempts=1)
    def quits() -> None:
        raise error

    handle = quits.delay()
    with pytest.raises(type(error)):  # the drain runs in the caller's process: Ctrl-C still stops it
        app.drain()
    info = handle.info()  # ... once the job is recorded
    assert (info.state, info.error_type) == (JobState.DEAD, f"builtins.{type(error).__name__}")
    assert info.traceback is not None and type(error).__name__ in info.traceback


@pytest.mark.parametrize("error", [SystemExit(2), KeyboardInterrupt()])
def test_system_exit_in_an_async_task_is_its_failure(app: TaskForge, error: BaseException) -> None:
    @app.task(name="aquits", max_attempts=1)
    async def aquits() -> None:
        await asyncio.sleep(0)
        raise error

    handle = aquits.delay()
    app.drain()
    info = handle.info()
    assert (info.state, info.error_type) == (JobState.DEAD, f"builtins.{type(error).__name__}")
    assert info.traceback is not None and type(error).__name__ in info.traceback


# -- progress meta -------------------------------------------------------------


def test_progress_meta_is_kept_beside_the_fraction(app: TaskForge) -> None:
    @app.task(name="crawl")
    def crawl() -> str:
        current_job().set_progress(0.3, "fetching", meta={"done": 3, "total": 10})
        return "ok"

    handle = crawl.delay()
    app.drain()
    info = handle.info()
    assert (info.progress, info.progress_message, info.progress_meta) == (0.3, "fetching", {"done": 3, "total": 10})
    assert info.to_dict()["progress_meta"] == {"done": 3, "total": 10}


def test_progress_without_meta_clears_it(app: TaskForge) -> None:
    @app.task(name="steps")
    def steps() -> None:
        current_job().set_progress(0.5, meta=[1, 2])
        current_job().set_progress(0.9)

    handle = steps.delay()
    app.drain()
    assert (handle.info().progress, handle.info().progress_meta) == (0.9, None)


def test_progress_meta_that_cannot_be_stored_raises_in_the_task(app: TaskForge) -> None:
    seen: list[str] = []

    @app.task(name="bad_meta", max_attempts=1)
    def bad_meta() -> None:
        for meta in (object(), "x" * 100_000):
            try:
                current_job().set_progress(0.1, meta=meta)
            except SerializationError as exc:
                seen.append(str(exc))

    bad_meta.delay()
    app.drain()
    assert len(seen) == 2
    assert seen[0].startswith("set_progress(meta=...): ") and "object" in seen[0]
    assert "over the 65,536 a progress meta may take" in seen[1]


# -- Celery spellings taskforge does not have ----------------------------------


def test_from_taskforge_import_async_result_names_app_job() -> None:
    with pytest.raises(ImportError, match=r"app\.job\(job_id\)"):
        from taskforge import AsyncResult  # noqa: F401
    with pytest.raises(AttributeError, match="has no attribute 'NoSuchThing'"):
        _ = taskforge.NoSuchThing  # type: ignore[attr-defined]
    for name in MODULE:
        with pytest.raises(ImportError, match="a Celery name"):
            getattr(taskforge, name)


def test_celery_app_methods_name_the_taskforge_way(app: TaskForge, add) -> None:
    with pytest.raises(AttributeError, match=r"TaskForge has no 'AsyncResult' \(a Celery name\): app\.job\(job_id\)"):
        app.AsyncResult("some-id")  # type: ignore[attr-defined]
    with pytest.raises(AttributeError, match=r"app\.send\('proj\.tasks\.add', \*args, \*\*kwargs\)"):
        app.send_task("add", args=(1, 2))  # type: ignore[attr-defined]
    with pytest.raises(AttributeError, match="object has no attribute 'sned'$"):
        _ = app.sned  # type: ignore[attr-defined]
    for name in APP:
        with pytest.raises(AttributeError, match="a Celery name"):
            getattr(app, name)
    assert getattr(app, "conf", None) is None and not hasattr(app, "send_task")  # duck typing still works


def test_handle_state_names_status(app: TaskForge, add) -> None:
    handle = add.delay(1)
    with pytest.raises(AttributeError, match=r"handle\.status\(\)"):
        _ = handle.state  # type: ignore[attr-defined]
    with pytest.raises(AttributeError, match="object has no attribute 'stat'$"):
        _ = handle.stat  # type: ignore[attr-defined]
    for name in HANDLE:
        with pytest.raises(AttributeError, match="a Celery name"):
            getattr(handle, name)


def test_task_retry_and_update_state_name_the_taskforge_way(app: TaskForge, add) -> None:
    with pytest.raises(AttributeError, match=r"raise Retry\(after=seconds, exc=err\)"):
        add.retry()  # type: ignore[attr-defined]
    with pytest.raises(AttributeError, match=r"set_progress\(fraction, message, meta="):
        add.update_state(state="PROGRESS")  # type: ignore[attr-defined]
    for name in TASK:
        with pytest.raises(AttributeError, match="a Celery name"):
            getattr(add, name)
    seen: list[str] = []

    @app.task(name="bound")
    def bound() -> None:
        for name in ("retry", "update_state", "request"):
            try:
                getattr(current_job(), name)
            except AttributeError as exc:
                seen.append(str(exc))

    bound.delay()
    app.drain()
    assert len(seen) == 3 and all("a Celery name" in text for text in seen)
    assert "raise Retry(after=seconds" in seen[0]


def test_celery_task_options_name_the_taskforge_way(app: TaskForge) -> None:
    with pytest.raises(TypeError, match=r"@app\.task: bind=: there is no self: current_job\(\)"):

        @app.task(bind=True)  # type: ignore[call-overload]
        def bound(self: object) -> None: ...

    with pytest.raises(TypeError, match="max_retries=: max_attempts=N"):
        app.task(max_retries=3)  # type: ignore[call-overload]
    with pytest.raises(TypeError, match="unexpected keyword argument"):
        app.task(colour="red")  # type: ignore[call-overload]
    assert app.tasks == {}
    assert set(OPTIONS) >= {"bind", "expires", "link", "serializer", "autoretry_for", "max_retries"}
