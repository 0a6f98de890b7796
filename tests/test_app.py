"""The application API (docs/reference/api.md): decorating, configuring and queueing tasks, and handles."""

from __future__ import annotations

import functools
import re
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

import taskforge
from taskforge import (
    ConfigurationError,
    JobHandle,
    JobNotFound,
    JobState,
    Priority,
    SerializationError,
    Task,
    TaskFailed,
    TaskForge,
)
from taskforge.worker.runner import run_claim
from tests.conftest import inspector

LEASE = 30_000


def claim_one(app: TaskForge, queue: str = "default"):
    claims, _ = app.broker.claims.dequeue(queue, LEASE)
    assert len(claims) == 1, claims
    return claims[0]


def nothing_stored(app: TaskForge, queue: str = "default") -> None:
    assert app.broker.inspection.counts(queue) == {"pending": 0, "scheduled": 0, "running": 0, "dead": 0, "deferred": 0}
    assert inspector(app).keys("taskforge:*job*") == []


# -- decorating ----------------------------------------------------------------


def test_bare_decorator_and_inline_call() -> None:
    app = TaskForge("t", broker="memory://")

    @app.task
    def ping():
        return "pong"

    assert isinstance(ping, Task)
    assert ping.name == f"{__name__}.test_bare_decorator_and_inline_call.<locals>.ping"
    assert app.tasks == {ping.name: ping}
    assert (ping.queue, ping.options.priority, ping.options.max_attempts, ping.options.timeout) == (
        "default",
        Priority.NORMAL,
        3,
        None,
    )
    assert ping() == "pong"  # runs inline, queues nothing
    assert app._broker is None, "a plain call must not even connect"


def test_decorator_with_options() -> None:
    app = TaskForge("t", broker="memory://")

    @app.task(priority="high", max_attempts=5, timeout=30, queue="mail", name="mail.send", backoff=2)
    def send_email(to, subject="hello"):
        """Send one."""
        return (to, subject)

    assert send_email.name == "mail.send" and app.tasks["mail.send"] is send_email
    assert (send_email.queue, send_email.options.priority, send_email.options.max_attempts) == (
        "mail",
        Priority.HIGH,
        5,
    )
    assert send_email.options.timeout == 30.0
    assert send_email.__doc__ == "Send one."
    assert send_email("a@b.c", subject="x") == ("a@b.c", "x")
    handle = send_email.delay("a@b.c")
    claim = claim_one(app, "mail")
    assert (claim.id, claim.task, claim.priority, claim.max_attempts, claim.timeout) == (
        handle.id,
        "mail.send",
        int(Priority.HIGH),
        5,
        30.0,
    )


INVALID_OPTIONS = [
    ({"priority": "urgent"}, "priority 'urgent'"),
    ({"priority": 7}, "priority 7"),
    ({"priority": None}, "priority None"),
    ({"priority": True}, "priority True"),
    ({"max_attempts": 0}, "max_attempts=0"),
    ({"max_attempts": -1}, "max_attempts=-1"),
    ({"max_attempts": 1.5}, "max_attempts=1.5"),
    ({"max_attempts": True}, "max_attempts=True"),
    ({"max_attempts": None}, "max_attempts=None"),
    ({"max_attempts": "3"}, "max_attempts='3'"),
    ({"timeout": 0}, "timeout=0"),
    ({"timeout": -1}, "timeout=-1"),
    ({"timeout": float("nan")}, "timeout=nan"),
    ({"timeout": float("inf")}, "timeout=inf"),
    ({"timeout": "x"}, "timeout='x'"),
    ({"timeout": True}, "timeout=True"),
    ({"backoff": -1}, "backoff=-1"),
    ({"backoff": "x"}, "backoff='x'"),
    ({"backoff": True}, "backoff=True"),
    ({"queue": ""}, "queue name ''"),
    ({"queue": "a{b"}, "'{'"),
    ({"queue": "a}b"}, "'}'"),
    ({"queue": "a b"}, "' '"),
    ({"queue": "a\tb"}, "'\\t'"),
    ({"queue": "a\x00b"}, "'\\x00'"),
    ({"queue": "q" * 1000}, "1000 characters"),
    ({"queue": None}, "queue name None"),
    ({"name": ""}, "task name ''"),
    ({"name": "   "}, "task name '   '"),
    ({"name": 5}, "task name 5"),
]


@pytest.mark.parametrize(("options", "fragment"), INVALID_OPTIONS, ids=lambda v: repr(v)[:40])
def test_invalid_option_raises_at_decoration(options: dict, fragment: str) -> None:
    app = TaskForge("t", broker="memory://")

    def job():
        pass

    with pytest.raises(ConfigurationError) as raised:
        app.task(**options)(job)
    message = str(raised.value)
    assert fragment in message, message
    assert re.search(r"use |limit is", message), f"the message does not say what to do: {message}"
    assert app.tasks == {}, "a rejected task must not be registered"


def test_a_callable_without_a_qualname_needs_a_name() -> None:
    app = TaskForge("t", broker="memory://")

    def add(a, b):
        return a + b

    class Adder:
        def __call__(self, a, b):
            return a + b

    for nameless in (functools.partial(add, 1), Adder()):
        with pytest.raises(ConfigurationError, match="pass name="):
            TaskForge("other", broker="memory://").task(nameless)
    # A task has no __qualname__ either, but what it needs is no second decorator, not a name.
    with pytest.raises(ConfigurationError, match="is already a task; decorate the function once"):
        TaskForge("other", broker="memory://").task(app.task(add))
    assert app.task(name="add.one")(functools.partial(add, 1))(2) == 3
    assert app.task(name="adder")(Adder())(2, 3) == 5
    with pytest.raises(ConfigurationError, match="decorates a function"):
        app.task(name="not.callable")(42)  # type: ignore[arg-type]


def test_with_options_rejects_bad_values() -> None:
    app = TaskForge("t", broker="memory://")

    @app.task
    def job():
        pass

    for bad in ({"priority": "urgent"}, {"max_attempts": 0}, {"timeout": -1}, {"queue": "a b"}):
        with pytest.raises(ConfigurationError):
            job.with_options(**bad)


def test_two_tasks_with_one_name_raise_at_registration() -> None:
    app = TaskForge("t", broker="memory://")

    @app.task(name="same")
    def first():
        pass

    with pytest.raises(ConfigurationError, match="two tasks named 'same'"):

        @app.task(name="same")
        def second():
            pass

    def make():
        def twin():
            pass

        return twin

    app.task(make())
    with pytest.raises(ConfigurationError, match="two tasks named"):
        app.task(make())  # the same default name: module.qualname
    assert app.tasks["same"] is first and len(app.tasks) == 2


def test_priority_parses_names_in_any_case() -> None:
    for text in ("low", "NORMAL", "High", "cRiTiCaL", " high "):
        assert Priority.parse(text) is Priority[text.strip().upper()]
    assert Priority.parse(Priority.HIGH) is Priority.HIGH and Priority.parse(3) is Priority.CRITICAL
    assert Priority.LOW < Priority.NORMAL < Priority.HIGH < Priority.CRITICAL
    app = TaskForge("t", broker="memory://")
    assert app.task(priority="CRITICAL")(lambda: None).options.priority is Priority.CRITICAL


def test_job_state_values() -> None:
    assert [s.value for s in JobState] == [
        "pending",
        "scheduled",
        "deferred",
        "running",
        "retrying",
        "succeeded",
        "dead",
        "cancelled",
    ]
    assert not JobState.DEFERRED.finished  # it waits for the jobs it depends on
    assert issubclass(JobState, str) and JobState("dead") is JobState.DEAD
    assert JobState.RUNNING == "running"


# -- queueing --------------------------------------------------------------------


def test_with_options_leaves_the_registry_alone_and_its_jobs_carry_the_options(app: TaskForge) -> None:
    @app.task(queue="mail", max_attempts=3)
    def send(to):
        pass

    registry = dict(app.tasks)
    urgent = send.with_options(priority=Priority.CRITICAL, max_attempts=1, timeout=5, queue="urgent")
    assert app.tasks == registry and app.tasks[send.name] is send and urgent is not send
    assert (send.options.priority, send.options.max_attempts, send.queue) == (Priority.NORMAL, 3, "mail")
    handle = urgent.delay("x@y.z")
    assert handle.queue == "urgent"
    claim = claim_one(app, "urgent")
    assert (claim.id, claim.task, claim.priority, claim.max_attempts, claim.timeout) == (
        handle.id,
        send.name,
        int(Priority.CRITICAL),
        1,
        5.0,
    )
    assert app.broker.inspection.counts("mail")["pending"] == 0
    # by name, lower case: the same as the member
    low = send.with_options(priority="low").delay("a")
    assert low.info().priority is Priority.LOW and low.info().max_attempts == 3


def test_with_options_timeout_none_clears_the_tasks_timeout(app: TaskForge) -> None:
    @app.task(timeout=30)
    def slow():
        pass

    assert slow.with_options(priority="high").options.timeout == 30  # not given: kept
    unbounded = slow.with_options(timeout=None)
    assert unbounded.options.timeout is None and slow.options.timeout == 30
    unbounded.delay()
    assert claim_one(app).timeout is None


def test_delay_many_returns_handles_in_order(app: TaskForge) -> None:
    @app.task
    def add(a, b=0):
        return a + b

    handles = add.delay_many([(1, 2), {"a": 3}, (4,), {"a": 5, "b": 6}])
    assert all(isinstance(h, JobHandle) for h in handles) and len({h.id for h in handles}) == 4
    assert [(h.info().args, h.info().kwargs) for h in handles] == [
        ((1, 2), {}),
        ((), {"a": 3}),
        ((4,), {}),
        ((), {"a": 5, "b": 6}),
    ]
    assert [claim_one(app).id for _ in handles] == [h.id for h in handles]
    assert add.delay_many([]) == []


def test_delay_many_is_all_or_nothing_on_a_serialization_error(app: TaskForge) -> None:
    @app.task
    def add(a, b=0):
        return a + b

    with pytest.raises(SerializationError) as raised:
        add.delay_many([(1,), (2,), {"a": 3, "b": object()}, (4,)])
    message = str(raised.value)
    assert "call #2" in message and "'b'" in message and "nothing was stored" in message
    nothing_stored(app)


def test_unsupported_arguments_name_the_argument_and_store_nothing(app: TaskForge) -> None:
    @app.task
    def job(*args, **kwargs):
        pass

    with pytest.raises(SerializationError, match=r"argument #1 \(positional") as raised:
        job.delay(1, object(), 3)
    assert "object" in str(raised.value)
    with pytest.raises(SerializationError, match=r"argument 'path' \(keyword\)"):
        job.delay(1, path=Path("/tmp"))
    with pytest.raises(SerializationError, match=r"argument #0"):
        job.apply_in(60, {1, 2, lambda: None})
    with pytest.raises(SerializationError, match=r"argument 'big'"):
        job.apply_at(datetime(2001, 1, 1), big=2**64)
    with pytest.raises(SerializationError):
        app.send("elsewhere.job", ["fine", object()])
    nothing_stored(app)


def test_apply_at_and_apply_in_take_their_first_argument_positionally(app: TaskForge) -> None:
    @app.task
    def job(when, delay=None):
        return when, delay

    future = datetime.now(timezone.utc) + timedelta(hours=1)
    at = job.apply_at(future, "w", delay="d")
    assert at.info().args == ("w",) and at.info().kwargs == {"delay": "d"}
    assert at.status() is JobState.SCHEDULED
    later = job.apply_in(timedelta(minutes=5), when=1, delay=2)
    assert later.info().kwargs == {"when": 1, "delay": 2} and later.status() is JobState.SCHEDULED
    seconds = job.apply_in(300, when="s")
    assert seconds.status() is JobState.SCHEDULED
    delta = seconds.info().scheduled_at - later.info().scheduled_at
    assert abs(delta.total_seconds()) < 5
    now = job.apply_at(datetime(2001, 1, 1, tzinfo=timezone.utc), when="past")
    assert now.status() is JobState.PENDING, "a time in the past means now"
    zero = job.apply_in(0, when="zero")
    assert zero.status() is JobState.PENDING
    with pytest.raises(ConfigurationError):
        job.apply_at("tomorrow", when=1)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError):
        job.apply_in("soon", when=1)  # type: ignore[arg-type]


def test_a_naive_datetime_means_utc(app: TaskForge) -> None:
    @app.task
    def job():
        pass

    naive = job.apply_at(datetime(2031, 6, 1, 12, 30))
    aware = job.apply_at(datetime(2031, 6, 1, 12, 30, tzinfo=timezone.utc))
    paris = job.apply_at(datetime(2031, 6, 1, 14, 30, tzinfo=timezone(timedelta(hours=2))))
    expected = datetime(2031, 6, 1, 12, 30, tzinfo=timezone.utc)
    assert naive.info().scheduled_at == aware.info().scheduled_at == paris.info().scheduled_at == expected


def test_send_by_name_of_an_unregistered_task_is_dead_lettered_by_a_worker(app: TaskForge) -> None:
    handle = app.send("billing.charge", 42, currency="EUR")
    assert handle.status() is JobState.PENDING and handle.queue == "default"
    info = handle.info()
    assert (info.task, info.args, info.kwargs) == ("billing.charge", (42,), {"currency": "EUR"})
    claim = claim_one(app)
    assert claim.task == "billing.charge"
    outcome = run_claim(app, claim)  # a worker of this app, which does not know the task
    assert outcome.state == "dead"
    info = handle.info()
    assert info.state is JobState.DEAD and info.attempts == 1
    assert "UnknownTask" in info.error and "billing.charge" in info.error
    assert app.broker.inspection.counts("default")["dead"] == 1
    with pytest.raises(TaskFailed, match="billing.charge"):
        handle.result(timeout=2)


def test_send_by_name_of_a_registered_task_uses_its_options(app: TaskForge) -> None:
    @app.task(name="mail.send", queue="mail", priority="high")
    def send(to):
        return to

    handle = app.send("mail.send", "a@b.c")
    assert handle.queue == "mail" and handle.info().priority is Priority.HIGH
    claim = claim_one(app, "mail")
    assert run_claim(app, claim).state == "succeeded"
    assert handle.result(timeout=2) == "a@b.c"


def test_a_second_app_finds_the_job_and_its_status(redis_url: str) -> None:
    producer = TaskForge("producer", broker=redis_url)

    @producer.task(queue="reports")
    def build(n):
        return n * 2

    handle = build.delay(21)
    other = TaskForge("other", broker=redis_url)  # knows no task at all
    found = other.job(handle.id)
    assert found.status() is JobState.PENDING and found.queue == "reports"
    assert found.info().task == build.name and found.info().args == (21,)
    assert run_claim(producer, claim_one(producer, "reports")).state == "succeeded"
    assert other.job(handle.id).result(timeout=5) == 42
    assert other.job(handle.id).status() is JobState.SUCCEEDED
    with pytest.raises(JobNotFound):
        other.job("0" * 32).status()


def test_result_of_a_dead_job_raises_task_failed_with_error_and_traceback(app: TaskForge) -> None:
    @app.task(max_attempts=1)
    def explode(x):
        raise ValueError(f"boom {x}")

    handle = explode.delay(7)
    assert run_claim(app, claim_one(app)).state == "dead"
    with pytest.raises(TaskFailed) as failed:
        handle.result(timeout=2)
    error = failed.value
    assert error.job_id == handle.id and error.state == "dead"
    assert error.error == "ValueError: boom 7"
    assert "Traceback (most recent call last)" in error.traceback and "boom 7" in error.traceback
    assert "boom 7" in str(error)
    assert isinstance(error, taskforge.TaskforgeError)


def test_result_times_out(app: TaskForge) -> None:
    @app.task
    def slow():
        pass

    handle = slow.delay()
    started = time.monotonic()
    with pytest.raises(TimeoutError, match=handle.id):
        handle.result(timeout=0.3)
    assert 0.3 <= time.monotonic() - started < 3
    with pytest.raises(TimeoutError):
        handle.result(timeout=0)


def test_result_of_an_unknown_job_raises_job_not_found(app: TaskForge) -> None:
    started = time.monotonic()
    with pytest.raises(JobNotFound, match="no-such-job"):
        app.job("no-such-job").result(timeout=5)
    assert time.monotonic() - started < 2, "an unknown id must fail at once, not wait"
    with pytest.raises(JobNotFound):
        app.job("no-such-job").status()
    with pytest.raises(JobNotFound):
        JobHandle(app, "no-such-job", "default").result(timeout=5)
    with pytest.raises(ConfigurationError):
        app.job("")


def test_result_after_retry_dead_waits_again(app: TaskForge) -> None:
    """A dead job that is retried is unfinished again: result() must wait, not return the old failure."""

    @app.task(max_attempts=1)
    def flaky():
        raise RuntimeError("first time")

    handle = flaky.delay()
    run_claim(app, claim_one(app))
    with pytest.raises(TaskFailed):
        handle.result(timeout=1)
    assert app.broker.cleanup.retry_dead("default", [handle.id]) == [handle.id]
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        handle.result(timeout=0.3)
    assert time.monotonic() - started >= 0.3
    claim = claim_one(app)
    assert app.broker.claims.succeed("default", claim.id, claim.token, b"\xa2ok")
    assert handle.result(timeout=2) == "ok"


# -- the package -------------------------------------------------------------------

PUBLIC_NAMES = {
    "TaskForge",
    "Priority",
    "Retry",
    "Task",
    "JobHandle",
    "JobInfo",
    "JobState",
    "errors",
    "TaskforgeError",
    "QueueFull",
    "SerializationError",
    "UnknownTask",
    "TaskFailed",
    "JobNotFound",
    "BrokerUnavailable",
}


def test_all_is_sorted_complete_and_real() -> None:
    names = taskforge.__all__
    assert names == sorted(names), "taskforge.__all__ is not sorted"
    assert len(names) == len(set(names))
    missing = [name for name in names if not hasattr(taskforge, name)]
    assert not missing, f"__all__ lists names taskforge does not have: {missing}"
    assert PUBLIC_NAMES <= set(names), f"public names missing from __all__: {PUBLIC_NAMES - set(names)}"
    public = {n for n in vars(taskforge) if not n.startswith("_")}
    modules = {n for n in public if type(getattr(taskforge, n)).__name__ == "module"}
    assert public - modules <= set(names), f"public but not in __all__: {public - modules - set(names)}"
    errors = "QueueFull SerializationError UnknownTask TaskFailed JobNotFound BrokerUnavailable ConfigurationError"
    for name in [*errors.split(), "CorruptQueue"]:
        assert issubclass(getattr(taskforge, name), taskforge.TaskforgeError)
        assert getattr(taskforge.errors, name) is getattr(taskforge, name)
