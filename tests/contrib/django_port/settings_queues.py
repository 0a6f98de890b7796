"""The ported tests' settings with QUEUES that a worker should serve, and a second, non-taskforge alias."""

from .settings import *  # noqa: F403
from .settings import BACKEND, BROKER

TASKS = {
    "default": {"BACKEND": BACKEND, "QUEUES": ["default", "all-queues-1"], "OPTIONS": {"BROKER": BROKER}},
    "dummy": {"BACKEND": "django.tasks.backends.dummy.DummyBackend"},
}
