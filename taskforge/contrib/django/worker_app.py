"""``taskforge.contrib.django:app``: Django set up, and the app of the configured backend, for a worker.

``taskforge worker`` serves the app's default queues unless given ``-q``;
a Django task on a queue of ``QUEUES`` that no worker serves would stay
``READY`` forever, so a worker started here says so at once.
``manage.py taskforge_worker`` passes ``-q`` for every queue of ``QUEUES``.
"""

from __future__ import annotations

import logging
import os

import click
from django.tasks import task_backends

from ...app import TaskForge
from ...errors import ConfigurationError
from .backend import TaskforgeBackend

log = logging.getLogger("taskforge.contrib.django")
ALIAS_VARIABLE = "TASKFORGE_DJANGO_BACKEND"


def configured_backend() -> TaskforgeBackend:
    """Django set up, and the backend ``TASKFORGE_DJANGO_BACKEND`` names (``default``)."""
    import django

    if not os.environ.get("DJANGO_SETTINGS_MODULE"):
        raise ConfigurationError(
            "taskforge.contrib.django:app needs DJANGO_SETTINGS_MODULE (e.g. DJANGO_SETTINGS_MODULE=mysite.settings)"
        )
    django.setup()
    alias = os.environ.get(ALIAS_VARIABLE, "default")
    try:
        backend = task_backends[alias]
    except Exception as exc:  # InvalidTaskBackend, ImproperlyConfigured: the settings' own words
        raise ConfigurationError(f"TASKS[{alias!r}]: {exc}") from None
    if not isinstance(backend, TaskforgeBackend):
        raise ConfigurationError(f"TASKS[{alias!r}] uses {type(backend).__name__}, not TaskforgeBackend")
    return backend


def served_queues(backend: TaskforgeBackend) -> list[str]:
    """Every queue a worker of the backend should serve: its app's, then those of ``QUEUES``."""
    return list(dict.fromkeys([*backend.app.queues(), *sorted(backend.queues)]))


def worker_app() -> TaskForge:
    backend = configured_backend()
    _warn_unserved(backend)
    return backend.app


def _warn_unserved(backend: TaskforgeBackend) -> None:
    """Loaded by ``taskforge worker`` (its click context): warn of each queue of ``QUEUES`` it will not serve."""
    context = click.get_current_context(silent=True)
    if context is None or context.command.name != "worker":
        return  # a child process, or any other loader: the supervisor has warned already
    served = set(context.params.get("queues") or backend.app.queues())
    missing = sorted(backend.queues - served)
    if missing:
        log.warning(
            "TASKS[%r]['QUEUES'] names %s, which this worker does not serve (it serves %s): Django tasks there "
            "stay READY until a worker does; run `python manage.py taskforge_worker` (every queue of QUEUES) "
            "or add %s",
            backend.alias,
            ", ".join(missing),
            ", ".join(sorted(served)),
            " ".join(f"-q {name}" for name in missing),
        )
