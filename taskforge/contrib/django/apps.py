"""The Django app ``taskforge.contrib.django``: in ``INSTALLED_APPS`` only for ``manage.py taskforge_worker``."""

from __future__ import annotations

from django.apps import AppConfig


class TaskforgeConfig(AppConfig):  # type: ignore[misc]
    name = "taskforge.contrib.django"
    label = "taskforge"
    verbose_name = "taskforge"
