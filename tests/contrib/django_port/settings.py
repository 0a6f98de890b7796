"""Django settings of the ported tests, for the test process and for the ``taskforge worker`` they start.

``TASKS`` here is what the worker runs with (``taskforge.contrib.django:app``
is the ``default`` alias's app); each test class overrides ``TASKS`` as the
original did, with ``TaskforgeBackend`` in place of Django's backends.
Django's ``django.tasks`` log lines go to stderr, so a test can read the
worker's RUNNING/SUCCESSFUL/FAILED lines from its log.
"""

import os

SECRET_KEY = "tests-only-not-a-secret"
# A process that set up the example project first (tests/contrib/test_django.py) keeps its
# settings and enqueues with its key: this package's worker must take its jobs' path HMACs too.
SECRET_KEY_FALLBACKS = ["example-only-not-a-secret"]
USE_TZ = True
INSTALLED_APPS: list[str] = []
ROOT_URLCONF = "tests.contrib.django_port.urls"
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}}
BROKER = os.environ.get("TASKFORGE_TEST_REDIS", "redis://127.0.0.1:6379/15")
BACKEND = "taskforge.contrib.django.TaskforgeBackend"
TASKS = {"default": {"BACKEND": BACKEND, "QUEUES": [], "OPTIONS": {"BROKER": BROKER}}}
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"stderr": {"class": "logging.StreamHandler", "level": "DEBUG"}},
    "loggers": {"django.tasks": {"handlers": ["stderr"], "level": "DEBUG", "propagate": False}},
}
