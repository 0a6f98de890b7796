"""A backend for Django's own tasks framework (``django.tasks``, Django 6.0+) that queues on taskforge.

Settings::

    TASKS = {
        "default": {
            "BACKEND": "taskforge.contrib.django.TaskforgeBackend",
            "QUEUES": ["default", "emails"],           # taskforge queues of the same names
            "OPTIONS": {"BROKER": "redis://localhost:6379/0"},
            # or "OPTIONS": {"APP": "myproject.queue:app"}  (a TaskForge of your own)
        }
    }

Plain Django ``@task`` functions then ``.enqueue()`` / ``.aenqueue()`` onto
taskforge, and a worker runs them::

    python manage.py taskforge_worker       # "taskforge.contrib.django" in INSTALLED_APPS
    DJANGO_SETTINGS_MODULE=mysite.settings taskforge worker taskforge.contrib.django:app -q default -q emails

The command serves every queue of ``QUEUES`` (``worker_app.py``);
``taskforge.contrib.django:app`` calls ``django.setup()`` and is the
backend's TaskForge app (the ``default`` backend; another alias with
``TASKFORGE_DJANGO_BACKEND``). Each Django task travels as a job of one of
two runner tasks (``django.task`` for plain functions, ``django.atask`` for
coroutines) whose arguments are the task's import path, its call and the
options it was enqueued with, so a worker needs no list of Django tasks: it
imports each by path, as Django's own pickling of a ``Task`` does, once the
HMAC the enqueuing backend made of the path with ``SECRET_KEY`` proves it
is one (``paths.py``).

The modules: ``backend`` (enqueue, get_result, checks), ``runner`` (the
runner tasks and Django's signals), ``results`` (``TaskResult`` from a job),
``errors`` (``exception_class_path``), ``values`` (JSON and datetimes),
``paths`` (which paths a job may have imported), ``connections`` (database
connections around each run), ``worker_app`` and
``management/commands/taskforge_worker.py`` (starting a worker).

What the backend claims, honestly: ``supports_defer`` (``run_after`` is
``apply_at``), ``supports_async_task`` (coroutines run on the worker's event
loops), ``supports_get_result`` (the result id is the job id, read back from
the job record from any process) and ``supports_priority``, mapped onto
taskforge's four levels: below 0 low, 0 normal, 1 to 49 high, 50 and up
critical. Retries: Django's API has none, so a Django task runs once
(``max_attempts=1``) unless ``OPTIONS["MAX_ATTEMPTS"]`` says otherwise.
"""

from __future__ import annotations

from typing import Any

from .backend import TaskforgeBackend, priority_of
from .runner import ARUN, RUN

__all__ = ["ARUN", "RUN", "TaskforgeBackend", "priority_of"]


def __getattr__(name: str) -> Any:
    """``taskforge.contrib.django:app`` for ``taskforge worker``: Django set up, the backend's app."""
    if name != "app":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from .worker_app import worker_app

    return worker_app()
