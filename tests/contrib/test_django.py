"""The Django example, end to end: Django's test client, a real ``taskforge worker``, ``TaskResult.refresh()``.

Django 6 needs Python 3.12+: on older Pythons this module is not collected
(``tests/contrib/conftest.py``) and ``test_django_elsewhere.py`` runs it under
a Python that has Django instead. Django's settings are process-wide, so this
module sets them up once for all its tests.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import IN_CI
from tests.worker.conftest import Worker, stop_workers, wait_for

if IN_CI:  # .ci/run installs Django wherever this module is collected: missing is a failure, not a skip
    import django
else:
    django = pytest.importorskip("django", minversion="6.0")

pytestmark = [pytest.mark.redis, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "django"


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    from tests.conftest import REDIS_URL, real_redis_or_skip

    real_redis_or_skip().flushdb()
    db = tmp_path_factory.mktemp("django") / "db.sqlite3"
    saved = dict(os.environ)
    os.environ.update(
        {"DJANGO_SETTINGS_MODULE": "mysite.settings", "TASKFORGE_BROKER_URL": REDIS_URL, "EXAMPLE_DB": str(db)}
    )
    sys.path.insert(0, str(EXAMPLE))
    django.setup()
    yield db.parent
    sys.path.remove(str(EXAMPLE))
    os.environ.clear()
    os.environ.update(saved)


@pytest.fixture
def worker(project: Path) -> Iterator[Worker]:
    from tests.conftest import REDIS_URL

    env_before = os.environ.get("PYTHONPATH")
    # The example's modules, and this directory's test tasks (tests.contrib.django_tasks).
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(EXAMPLE), str(ROOT), env_before]))
    started = Worker(EXAMPLE, REDIS_URL, ["-c", "1"], project / "worker.log", "taskforge.contrib.django:app")
    yield started
    stop_workers([started])
    if env_before is None:
        os.environ.pop("PYTHONPATH", None)
    else:
        os.environ["PYTHONPATH"] = env_before


def test_the_view_enqueues_the_worker_runs_and_refresh_shows_the_value(worker: Worker) -> None:
    from django.tasks import TaskResultStatus, default_task_backend
    from django.test import Client
    from shop.tasks import thumbnail

    response = Client().get("/thumbnails/", {"name": "dog.png", "size": 32})
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["status"] == "READY"
    result = thumbnail.get_result(body["id"])
    wait_for(lambda: (result.refresh(), result.is_finished)[1], 30, "the Django task to finish")
    assert result.status == TaskResultStatus.SUCCESSFUL, worker.output()
    assert result.return_value == {"name": "dog.png", "thumbnail": "thumbs/32/dog.png", "bytes": 128}
    assert result.args == ["dog.png", 32] and result.attempts == 1
    assert Client().get(f"/results/{body['id']}/").json()["return_value"]["bytes"] == 128
    backend = default_task_backend
    assert backend.supports_defer and backend.supports_get_result and backend.supports_async_task
    info = backend.app.job(result.id).info()
    assert info.priority.name == "HIGH"  # Django's priority 10


def test_delay_on_commit_queues_nothing_on_rollback_and_once_on_commit(project: Path) -> None:
    from django.db import transaction
    from mysite.queue import app, send_receipt

    from taskforge.status import queue_status

    def pending() -> int:
        return queue_status(app, "default").pending

    app.broker.cleanup.purge("default", "pending")

    class Rollback(Exception):
        pass

    with pytest.raises(Rollback), transaction.atomic():
        send_receipt.delay_on_commit(1)
        raise Rollback
    assert pending() == 0  # nothing was stored

    with transaction.atomic():
        send_receipt.delay_on_commit(2)
        assert pending() == 0  # not before the commit
    assert pending() == 1
    [ran] = app.drain()
    assert ran.result == "receipt for order 2 sent" and ran.args == (2,)
    with pytest.raises(TypeError), transaction.atomic():
        send_receipt.delay_on_commit()  # checked inside the transaction, where the caller sees it


def test_a_failing_and_a_deferred_django_task(worker: Worker) -> None:
    from datetime import datetime, timedelta, timezone

    from django.tasks import TaskResultStatus
    from shop.tasks import thumbnail

    failing = thumbnail.enqueue("bad.png", "not a number")  # size * size raises TypeError in the worker
    wait_for(lambda: (failing.refresh(), failing.is_finished)[1], 30, "the failing task to end")
    assert failing.status == TaskResultStatus.FAILED
    [error] = failing.errors
    assert error.exception_class is TypeError and "Traceback" in error.traceback
    later = thumbnail.using(run_after=datetime.now(timezone.utc) + timedelta(seconds=2)).enqueue("late.png", 2)
    time.sleep(0.5)
    later.refresh()
    assert later.status == TaskResultStatus.READY
    wait_for(lambda: (later.refresh(), later.is_finished)[1], 30, "the deferred task to run")
    assert later.return_value["thumbnail"] == "thumbs/2/late.png"


def test_an_async_django_task_enqueued_from_a_coroutine(worker: Worker) -> None:
    import asyncio

    from django.tasks import default_task_backend
    from shop.tasks import fetch_title

    async def enqueue() -> object:
        try:
            return await fetch_title.aenqueue("https://example.org")
        finally:
            await default_task_backend.app.aclose()

    result = asyncio.run(enqueue())
    wait_for(lambda: (result.refresh(), result.is_finished)[1], 30, "the async task to finish")
    assert result.return_value == "title of https://example.org"
    assert default_task_backend.app.job(result.id).info().task == "django.atask"


def test_a_task_taking_djangos_context_sees_its_attempt_and_id(worker: Worker) -> None:
    from shop.tasks import which_attempt

    result = which_attempt.enqueue("ctx")
    wait_for(lambda: (result.refresh(), result.is_finished)[1], 30, "the context task to finish")
    assert result.return_value == f"ctx: attempt 1 of result {result.id}"


def test_bad_setups_get_one_clear_error(project: Path) -> None:
    import subprocess

    from django.tasks.exceptions import TaskResultDoesNotExist
    from shop.tasks import thumbnail

    with pytest.raises(TaskResultDoesNotExist):
        thumbnail.get_result("0" * 32)
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    command = [sys.executable, "-m", "taskforge", "worker", "taskforge.contrib.django:app", "--burst"]
    run = subprocess.run(command, cwd=EXAMPLE, env=env, capture_output=True, text=True, timeout=60)
    assert run.returncode == 2 and "needs DJANGO_SETTINGS_MODULE" in run.stderr, run.stderr
    assert "Traceback" not in run.stderr
    env["DJANGO_SETTINGS_MODULE"] = "mysite.settings"
    env["TASKFORGE_DJANGO_BACKEND"] = "nosuch"
    run = subprocess.run(command, cwd=EXAMPLE, env=env, capture_output=True, text=True, timeout=60)
    assert run.returncode == 2 and "TASKS['nosuch']" in run.stderr and "Traceback" not in run.stderr, run.stderr


# -- Django's contract (issue 31): each test below failed before its fix ------------------------------


def finished(result: Any, what: str) -> Any:
    wait_for(lambda: (result.refresh(), result.is_finished)[1], 30, what)
    return result


def test_a_dropped_database_connection_does_not_fail_the_next_task(worker: Worker) -> None:
    from django.tasks import TaskResultStatus

    from tests.contrib.django_tasks import drop_connection, query_database

    dropped = finished(drop_connection.enqueue(), "the task that drops its connection")
    assert dropped.status == TaskResultStatus.SUCCESSFUL, worker.output()
    after = finished(query_database.enqueue(), "the next task to query the database")
    assert after.status == TaskResultStatus.SUCCESSFUL, [e.traceback for e in after.errors]
    assert after.return_value == 1


def test_a_dropped_database_connection_does_not_fail_the_next_async_task(worker: Worker) -> None:
    from django.tasks import TaskResultStatus

    from tests.contrib.django_tasks import adrop_connection, aquery_database

    dropped = finished(adrop_connection.enqueue(), "the async task that drops its connection")
    assert dropped.status == TaskResultStatus.SUCCESSFUL, worker.output()
    after = finished(aquery_database.enqueue(), "the next async task to query the database")
    assert after.status == TaskResultStatus.SUCCESSFUL, [e.traceback for e in after.errors]
    assert after.return_value == 1


def test_a_drain_inside_a_transaction_leaves_its_connection_alone(project: Path) -> None:
    """A Django TestCase runs each test in a transaction: running jobs in-process must not close its connection."""
    from django.db import connection, transaction
    from django.tasks import default_task_backend

    from tests.contrib.django_tasks import query_database

    app = default_task_backend.app
    for queue in ("default", "emails"):
        app.broker.cleanup.purge(queue, "pending")
    with transaction.atomic():
        result = query_database.enqueue()
        [ran] = app.drain()
        assert ran.id == result.id and ran.result == 1
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    assert not connection.needs_rollback


def test_the_backends_own_app_serves_every_queue_of_queues(project: Path) -> None:
    from taskforge.contrib.django import TaskforgeBackend
    from tests.conftest import REDIS_URL

    backend = TaskforgeBackend("own", {"QUEUES": ["default", "emails"], "OPTIONS": {"BROKER": REDIS_URL}})
    assert backend.app.queues() == ["default", "emails"]  # what `taskforge worker` serves without -q


def test_an_argument_that_is_not_json_raises_type_error_and_stores_nothing(project: Path) -> None:
    import asyncio
    from datetime import datetime, timezone

    from django.tasks import default_task_backend

    from taskforge.status import queue_status
    from tests.contrib.django_tasks import echo

    app = default_task_backend.app
    app.broker.cleanup.purge("default", "pending")
    with pytest.raises(TypeError):
        echo.enqueue(datetime.now(timezone.utc))  # taskforge could store it; Django's contract is JSON
    with pytest.raises(TypeError):
        asyncio.run(echo.aenqueue({"when": {1, 2}}))
    assert queue_status(app, "default").pending == 0


def test_the_worker_sends_task_started_and_task_finished(worker: Worker) -> None:
    from shop.tasks import fetch_title, thumbnail

    from tests.contrib.django_tasks import out_of_stock

    ok = finished(thumbnail.enqueue("signal.png", 8), "a task to succeed")
    failed = finished(out_of_stock.enqueue("socks"), "a task to fail")
    coroutine = finished(fetch_title.enqueue("https://example.org"), "an async task to succeed")

    def logged() -> bool:
        out = worker.output()
        return all(
            line in out
            for line in (
                f"Task id={ok.id} path=shop.tasks.thumbnail state=RUNNING",
                f"Task id={ok.id} path=shop.tasks.thumbnail state=SUCCESSFUL",
                f"Task id={failed.id} path=tests.contrib.django_tasks.out_of_stock state=FAILED",
                f"Task id={coroutine.id} path=shop.tasks.fetch_title state=RUNNING",
                f"Task id={coroutine.id} path=shop.tasks.fetch_title state=SUCCESSFUL",
            )
        )

    wait_for(logged, 30, "Django's log lines of task_started and task_finished")
    assert "OutOfStock: socks" in worker.output()  # task_finished is sent inside the handler: the traceback is logged


def test_a_failed_task_names_an_exception_class_that_imports(worker: Worker) -> None:
    from tests.contrib.django_tasks import OutOfStock, now, out_of_stock

    [error] = finished(out_of_stock.enqueue("socks"), "a task to fail").errors
    assert error.exception_class is OutOfStock and "OutOfStock: socks" in error.traceback
    [error] = finished(now.enqueue(), "a task returning a datetime").errors
    assert error.exception_class is TypeError  # a result that is not JSON fails the task, as Django's backends do


@pytest.mark.parametrize(
    ("error_type", "text", "path"),
    [
        ("builtins.ValueError", "ValueError: bad", "builtins.ValueError"),
        ("taskforge.errors.SoftTimeout", "SoftTimeout: 5 s", "taskforge.errors.SoftTimeout"),
        ("nosuch.module.Gone", "Gone: it was", "taskforge.errors.TaskforgeError"),
        (None, "Traceback (most recent call last):\n  ...\nKeyError: 'x'", "builtins.KeyError"),
        (None, "tests.contrib.django_tasks.OutOfStock: socks", "tests.contrib.django_tasks.OutOfStock"),
        (None, "SoftTimeout: the task ran past its soft limit", "taskforge.errors.SoftTimeout"),
        (None, "SerializationError: cannot encode", "taskforge.errors.SerializationError"),
        (None, "WorkerCrashed: the child died (exit code -9)", "taskforge.errors.WorkerCrashed"),
        (None, "WorkerLost: lease expired", "taskforge.errors.WorkerLost"),
        (None, "os.path: not an exception", "taskforge.errors.TaskforgeError"),
        (
            None,
            'Traceback (most recent call last):\n  File "t.py", line 1\nValueError: two\nlines: of text',
            "builtins.ValueError",
        ),
        (None, "Traceback (most recent call last):\n  ...\nKeyError: 'x'\nOSError: a note", "builtins.KeyError"),
        (
            None,
            "Traceback (most recent call last):\n  ...\n  | nested: only indented lines",
            "taskforge.errors.TaskforgeError",
        ),
        (None, "", "taskforge.errors.TaskforgeError"),
        (None, None, "taskforge.errors.TaskforgeError"),
    ],
)
def test_exception_class_path_always_imports(
    project: Path, error_type: str | None, text: str | None, path: str
) -> None:
    from django.tasks.base import TaskError

    from taskforge.contrib.django.errors import exception_class_path

    found = exception_class_path(error_type, text)
    assert found == path
    assert issubclass(TaskError(exception_class_path=found, traceback="").exception_class, BaseException)


def test_manage_py_taskforge_worker_serves_every_queue_of_queues(project: Path) -> None:
    from django.tasks import TaskResultStatus
    from shop.tasks import send_welcome_email

    from tests.conftest import REDIS_URL

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(EXAMPLE), str(ROOT)]), "TASKFORGE_BROKER_URL": REDIS_URL}
    log = project / "manage-worker.log"
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "manage.py", "taskforge_worker", "-c", "1"],
            cwd=EXAMPLE,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        result = send_welcome_email.enqueue("ada@example.org")
        wait_for(lambda: (result.refresh(), result.is_finished)[1], 60, "the emails task: " + log.read_text())
        assert result.status == TaskResultStatus.SUCCESSFUL
        assert result.return_value == "welcome mail sent to ada@example.org"
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        assert proc.wait(timeout=30) == 0, log.read_text()
    assert "-q default -q emails" in log.read_text()  # the command line it ran, printed first


def test_taskforge_worker_warns_of_queues_it_does_not_serve(worker: Worker) -> None:
    wait_for(lambda: "emails" in worker.output(), 30, "the worker's warning about QUEUES")
    out = worker.output()
    assert "QUEUES" in out and "manage.py taskforge_worker" in out, out


def test_the_system_check_flags_queue_names_taskforge_cannot_serve(project: Path) -> None:
    from taskforge.contrib.django import TaskforgeBackend
    from tests.conftest import REDIS_URL

    bad = TaskforgeBackend("bad", {"QUEUES": ["default", "e{mails}"], "OPTIONS": {"BROKER": REDIS_URL}})
    [error] = bad.check()
    assert error.id == "taskforge.E001" and "e{mails}" in error.msg
    anything = TaskforgeBackend("any", {"QUEUES": [], "OPTIONS": {"BROKER": REDIS_URL}})
    assert anything.check() == []  # an empty QUEUES allows any queue, as Django's own tests expect
    assert TaskforgeBackend("ok", {"QUEUES": ["default", "emails"], "OPTIONS": {"BROKER": REDIS_URL}}).check() == []


def test_arguments_and_results_come_back_as_json(worker: Worker) -> None:
    from tests.contrib.django_tasks import echo

    result = echo.enqueue(("a", 1))
    assert result.args == [["a", 1]]
    finished(result, "echo to run")
    assert result.return_value == ["a", 1]  # a tuple comes back a list, as from any JSON store
    assert echo.get_result(result.id).args == [["a", 1]]


def test_djangos_documented_example_of_a_tuple_argument_fails(worker: Worker) -> None:
    from django.tasks import TaskResultStatus

    from tests.contrib.django_tasks import double_dictionary

    result = finished(double_dictionary.enqueue((1, 2, 3)), "double_dictionary to run")
    assert result.status == TaskResultStatus.FAILED  # as under any Django backend: the list is unhashable
    assert result.errors[0].exception_class is TypeError


def test_get_result_keeps_using_and_enqueued_at(project: Path) -> None:
    from datetime import datetime, timedelta, timezone

    from django.tasks import default_task_backend
    from shop.tasks import thumbnail

    later = datetime.now(timezone.utc) + timedelta(hours=1)
    task = thumbnail.using(priority=-20, queue_name="emails", run_after=later)
    result = task.enqueue("kept.png", 4)
    got = default_task_backend.get_result(result.id)
    assert got.task == task == result.task
    assert got.enqueued_at == result.enqueued_at is not None
    assert default_task_backend.app.job(result.id).info().queue == "emails"


def test_a_naive_run_after_without_use_tz_is_in_time_zone(project: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The backend reads it in ``TIME_ZONE`` itself: the app gets an aware time and has no naive one to warn of."""
    from datetime import datetime, timedelta
    from zoneinfo import ZoneInfo

    from django.tasks import default_task_backend
    from django.test import override_settings
    from shop.tasks import thumbnail

    tokyo = ZoneInfo("Asia/Tokyo")
    with override_settings(USE_TZ=False, TIME_ZONE="Asia/Tokyo"):
        naive = datetime.now(tokyo).replace(tzinfo=None, microsecond=0) + timedelta(hours=1)
        result = thumbnail.using(run_after=naive).enqueue("tokyo.png", 2)
        info = default_task_backend.app.job(result.id).info()
        assert info.scheduled_at is not None
        assert abs(info.scheduled_at - naive.replace(tzinfo=tokyo)) < timedelta(seconds=1)
    assert not [r for r in caplog.records if "naive datetime" in r.getMessage()]


def test_get_result_of_a_job_whose_path_is_not_a_task_is_suspicious(project: Path) -> None:
    from django.core.exceptions import SuspiciousOperation
    from django.tasks import default_task_backend

    app = default_task_backend.app
    handle = app.send("django.task", "os.getcwd", [], {}, False)
    with pytest.raises(SuspiciousOperation):
        default_task_backend.get_result(handle.id)


def test_a_worker_does_not_call_a_path_that_is_not_a_task(worker: Worker) -> None:
    from django.tasks import default_task_backend

    from taskforge.job import JobState

    handle = default_task_backend.app.send("django.task", "os.getcwd", [], {}, False)
    wait_for(lambda: handle.info().state == JobState.DEAD, 30, "the job of a path that is no task to fail")
    assert "SuspiciousOperation" in (handle.info().error or "")


def test_a_path_the_backend_did_not_vouch_for_is_never_imported(worker: Worker) -> None:
    # Importing a module runs its code: a job naming one (anyone who can write to Redis can send
    # one) must not get it imported, in the worker or in a process reading the result.
    from django.tasks import default_task_backend

    from taskforge.job import JobState
    from tests.conftest import admin_client

    side = admin_client()
    side.delete("django-marker-imported")
    app = default_task_backend.app
    path = "tests.contrib.django_marker.task"
    unsigned = app.send("django.task", path, [], {}, False)
    forged = app.send("django.task", path, [], {}, False, {"path_mac": "0" * 64})
    for handle in (unsigned, forged):
        wait_for(lambda h=handle: h.info().state == JobState.DEAD, 30, "the job of a path not vouched for to fail")
    assert side.get("django-marker-imported") is None, "the worker imported the module"
    for handle in (unsigned, forged):
        assert "ImportError" in (handle.info().error or "") and "not imported" in handle.info().error
        with pytest.raises(ImportError, match="not imported"):
            default_task_backend.get_result(handle.id)
    assert "tests.contrib.django_marker" not in sys.modules, "get_result imported the module"


def test_only_this_projects_secret_key_vouches_for_a_path(project: Path) -> None:
    from django.test import override_settings

    from taskforge.contrib.django.paths import path_mac, vouched

    mac = path_mac("shop.tasks.thumbnail")
    assert mac and vouched("shop.tasks.thumbnail", mac)
    assert not vouched("shop.tasks.other", mac) and not vouched("shop.tasks.thumbnail", None)
    with override_settings(SECRET_KEY="another", SECRET_KEY_FALLBACKS=[]):
        assert not vouched("shop.tasks.thumbnail", mac)
    from django.conf import settings

    with override_settings(SECRET_KEY="rotated", SECRET_KEY_FALLBACKS=[settings.SECRET_KEY]):
        assert vouched("shop.tasks.thumbnail", mac)


# -- What Django keeps per attempt, and the system check: each test below failed before its fix ---------


def with_two_attempts(task: Any, *args: Any) -> Any:
    """Enqueue ``task`` as the backend does, with two attempts where the example's backend gives one."""
    from django.tasks import default_task_backend

    runner, call, _ = default_task_backend._prepare(task, args, {})
    handle = runner.with_options(max_attempts=2).delay(*call)
    return default_task_backend.get_result(handle.id)


def test_worker_ids_name_the_worker_that_ran_each_attempt(worker: Worker) -> None:
    import re
    import socket

    from django.tasks import TaskResultStatus

    from tests.contrib.django_tasks import fails_first

    result = finished(with_two_attempts(fails_first, False), "a task that fails once, then succeeds")
    assert result.status == TaskResultStatus.SUCCESSFUL, [e.traceback for e in result.errors]
    assert result.return_value == 2 and result.attempts == 2
    # The worker's id as its registry entry (and `taskforge status`) gives it: host, supervisor pid, a tag.
    pattern = rf"{re.escape(socket.gethostname())}:{worker.pid}:[0-9a-f]{{4}}"
    assert all(re.fullmatch(pattern, worker_id) for worker_id in result.worker_ids), result.worker_ids


def test_started_at_is_the_first_runs_after_a_retry(worker: Worker) -> None:
    from tests.contrib.django_tasks import OutOfStock, fails_first

    result = finished(with_two_attempts(fails_first, False), "a task that fails once, then succeeds")
    assert result.attempts == 2
    assert result.started_at < result.last_attempted_at  # the first run's start, then the retry's
    assert result.enqueued_at <= result.started_at and result.last_attempted_at <= result.finished_at
    [error] = result.errors  # the first run's, kept after the success
    assert error.exception_class is OutOfStock and "attempt 1" in error.traceback


def test_every_failed_attempt_keeps_its_own_error(worker: Worker) -> None:
    from django.tasks import TaskResultStatus

    from tests.contrib.django_tasks import OutOfStock, fails_first

    result = finished(with_two_attempts(fails_first, True), "a task that fails twice")
    assert result.status == TaskResultStatus.FAILED and result.attempts == 2
    first, second = result.errors
    assert first.exception_class is OutOfStock and second.exception_class is OutOfStock
    assert "OutOfStock: attempt 1" in first.traceback and "OutOfStock: attempt 2" in second.traceback


def test_the_system_check_warns_of_a_broker_it_cannot_reach(project: Path) -> None:
    from taskforge.contrib.django import TaskforgeBackend

    down = TaskforgeBackend("down", {"QUEUES": [], "OPTIONS": {"BROKER": "redis://ada:s3cret@127.0.0.1:1/0"}})
    [warning] = down.check()
    assert warning.id == "taskforge.W001" and "TASKS['down']" in warning.msg
    assert "redis://ada:***@127.0.0.1:1/0" in warning.msg and "s3cret" not in warning.msg
    assert "Connection refused" in warning.msg  # the reason, as the connection gave it
