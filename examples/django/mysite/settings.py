"""Settings of the example: the parts that matter are TASKS and, for delay_on_commit, DATABASES."""

import os
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
SECRET_KEY = "example-only-not-a-secret"
DEBUG = True
ALLOWED_HOSTS = ["*"]
INSTALLED_APPS = ["shop", "taskforge.contrib.django"]  # the latter for `manage.py taskforge_worker`
ROOT_URLCONF = "mysite.urls"
USE_TZ = True
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.environ.get("EXAMPLE_DB", BASE_DIR / "db.sqlite3"),
    }
}

# Django's tasks framework, on taskforge. "APP" shares one TaskForge app
# between Django's @task functions and taskforge's own tasks, so one
# worker runs both:
#   DJANGO_SETTINGS_MODULE=mysite.settings taskforge worker taskforge.contrib.django:app
TASKS = {
    "default": {
        "BACKEND": "taskforge.contrib.django.TaskforgeBackend",
        "QUEUES": ["default", "emails"],
        "OPTIONS": {"APP": "mysite.queue:app"},
    }
}
