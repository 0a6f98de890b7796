"""``manage.py taskforge_worker``: ``taskforge worker`` for the project's Django tasks backend.

Django's system checks run first; then the worker serves every queue of the
backend's ``QUEUES`` (and its app's own queues) unless ``-q`` names some.
Every option of ``taskforge worker`` is taken as it is: the options here are
built from that command's own, so the two never drift apart.
"""

from __future__ import annotations

import os
from typing import Any

import click
from django.core.management.base import BaseCommand, CommandParser

from .....cli.worker import worker
from ...worker_app import ALIAS_VARIABLE, configured_backend, served_queues

APP = "taskforge.contrib.django:app"


class Command(BaseCommand):  # type: ignore[misc]
    help = (
        "Run a taskforge worker for a Django tasks backend (TaskforgeBackend): every queue of its QUEUES "
        "unless -q is given. The other options are those of `taskforge worker`."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--backend", default="default", help="The alias in TASKS (default: default).")
        for option in _worker_options():
            extra: dict[str, Any] = {"action": "append"} if option.multiple else {}
            if option.is_flag:
                extra = {"action": "store_true"}
            help_text = (option.help or "").replace("%", "%%")
            parser.add_argument(*option.opts, dest=option.name, default=None, help=help_text, **extra)

    def handle(self, *args: Any, **options: Any) -> None:
        os.environ[ALIAS_VARIABLE] = options["backend"]  # the worker's children load the same backend
        backend = configured_backend()
        argv = [APP]
        for option in _worker_options():
            value = options.get(option.name or "")
            if option.is_flag:
                argv += [option.opts[-1]] if value else []
            elif option.multiple:
                for item in value or []:
                    argv += [option.opts[-1], str(item)]
            elif value is not None:
                argv += [option.opts[-1], str(value)]
        if not options.get("queues"):
            for name in served_queues(backend):
                argv += ["-q", name]
        self.stdout.write(f"taskforge worker {' '.join(argv)}")
        worker.main(args=argv, prog_name="manage.py taskforge_worker")


def _worker_options() -> list[click.Option]:
    return [param for param in worker.params if isinstance(param, click.Option)]
