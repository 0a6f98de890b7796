"""Imported only when a path no backend vouched for is imported: it says so in Redis (``test_django.py``)."""

import os

import redis

redis.Redis.from_url(os.environ["TASKFORGE_BROKER_URL"]).set("django-marker-imported", os.getpid())
task = None
