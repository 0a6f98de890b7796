"""The Django example, end to end: Django's test client, a real ``taskforge worker``, ``TaskResult.refresh()``.

Django 6 needs Python 3.12+: on older Pythons this module is not collected
(``tests/contrib/conftest.py``) and ``test_django_elsewhere.py`` runs it under
a Python that has Django instead. Django's settings are process-wide, so this
module sets them up once for all its tests.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import IN_CI
from tests.worker.conftest import Worker, stop_workers, wait_for

if IN_CI:  # .ci/run installs Django wherever this module is collected: missing is a failure, not a skip
    import django
else:
    django = pytest.importorskip("django", minversion="6.0")

pytestmark = [pytest.mark.redis, pytest.mark.slow]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "django"


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
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(EXAMPLE), env_before]))
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

    from taskforge.inspect import queue_status

    def pending() -> int:
        return queue_status(app, "default").pending

    app.broker.purge("default", "pending")

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
