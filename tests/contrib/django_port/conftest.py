"""One Django set-up and one real ``taskforge worker`` for all the ported tests.

Django's settings are process-wide: if nothing configured them yet, this
package configures its own (``settings.py``) to collect its modules and again
to run them, and unconfigures them after each, so ``tests/contrib/test_django.py``
can set up the example project before or after it; if something configured
them before, the tests' own ``override_settings`` of ``TASKS`` is all they
need. The worker starts once for the package (not per
test) and serves the queues the tests use except ``unserved``, where a job
stays READY; nothing here flushes the Redis database, so other tests on it run
undisturbed.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.conftest import IN_CI

if not IN_CI:  # Django 6 needs Python 3.12+; below it tests/contrib/conftest.py does not collect this folder
    pytest.importorskip("django", minversion="6.0")

from .support import ROOT, SETTINGS  # noqa: E402


def _configure() -> bool:
    """Set Django up with this package's settings unless something did before; whether this did.

    At import too, because collecting the test modules imports ``tasks.py``,
    whose ``@task`` decorators need settings.
    """
    import django
    from django.conf import settings

    if settings.configured:
        return False
    os.environ["DJANGO_SETTINGS_MODULE"] = SETTINGS
    django.setup()
    return True


_SAVED = os.environ.get("DJANGO_SETTINGS_MODULE")
_configure()


def pytest_collection_finish(session: pytest.Session) -> None:
    """Collected: leave Django unconfigured again, for whichever Django tests run first."""
    _release()


def _release() -> None:
    from django.conf import settings

    if settings.configured and os.environ.get("DJANGO_SETTINGS_MODULE") == SETTINGS:
        _unconfigure()
        if _SAVED is None:
            os.environ.pop("DJANGO_SETTINGS_MODULE", None)
        else:
            os.environ["DJANGO_SETTINGS_MODULE"] = _SAVED


@pytest.fixture(scope="package", autouse=True)
def django_settings() -> Iterator[None]:
    """This package's settings while its tests run, unless another set is in place (then TASKS is overridden)."""
    _configure()
    yield
    _release()


def _unconfigure() -> None:
    """Back to Django's state before ``django.setup()``: settings lazy, no app registry, no backends."""
    from asgiref.local import Local
    from django.apps import apps
    from django.conf import settings
    from django.tasks import task_backends
    from django.utils.functional import empty

    settings._wrapped = empty
    apps.app_configs = {}
    apps.apps_ready = apps.models_ready = apps.ready = False
    apps.loading = False
    apps.clear_cache()
    task_backends._settings = None
    task_backends.__dict__.pop("settings", None)
    task_backends._connections = Local()


@pytest.fixture(scope="package", autouse=True)
def taskforge_worker(django_settings: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    from tests.conftest import REDIS_URL, real_redis_or_skip
    from tests.contrib.django_port import support
    from tests.worker.conftest import Worker, stop_workers

    real_redis_or_skip()
    saved = {name: os.environ.get(name) for name in ("DJANGO_SETTINGS_MODULE", "PYTHONPATH")}
    os.environ["DJANGO_SETTINGS_MODULE"] = SETTINGS
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), saved["PYTHONPATH"]]))
    queues = [arg for queue in support.SERVED for arg in ("-q", queue)]
    log = tmp_path_factory.mktemp("django_port") / "worker.log"
    try:
        worker = Worker(ROOT, REDIS_URL, ["-c", "1", "-t", "4", *queues], log, "taskforge.contrib.django:app")
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    support.WORKER = worker
    yield
    support.WORKER = None
    stop_workers([worker])
