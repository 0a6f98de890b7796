"""What crosses between Django and a job: JSON values and datetimes, as Django's settings read them.

Django's contract is JSON: arguments and results come back as a JSON store
gives them (a tuple as a list, keys as strings), and a value JSON cannot
hold is a ``TypeError``, raised before anything is stored. taskforge's own
serializer holds more (tuples, datetimes), so the backend normalizes first.
Datetimes: with ``USE_TZ`` Django's are aware; without it they are naive
and in ``TIME_ZONE``, which is how a naive ``run_after`` is read.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any

from django.conf import settings
from django.utils import timezone as django_timezone
from django.utils.json import normalize_json


def as_json(value: Any) -> Any:
    """``value`` as it comes back from JSON; ``TypeError`` (Django's) for what JSON cannot hold."""
    return json.loads(json.dumps(normalize_json(value)))


def aware(when: datetime) -> datetime:
    """A ``run_after`` as an instant: a naive one is in ``TIME_ZONE`` (only allowed without ``USE_TZ``)."""
    if when.tzinfo is not None:
        return when
    instant: datetime = django_timezone.make_aware(when, django_timezone.get_default_timezone())
    return instant


def for_django(when: datetime | None) -> datetime | None:
    """An instant as Django's settings want it: aware with ``USE_TZ``, else naive in ``TIME_ZONE``."""
    if when is None or settings.USE_TZ:
        return when
    local: datetime = django_timezone.make_naive(when, django_timezone.get_default_timezone())
    return local


def now() -> datetime:
    return datetime.now(timezone.utc)


def to_text(when: datetime | None) -> str | None:
    return None if when is None else aware(when).isoformat()


def from_text(text: object) -> datetime | None:
    return datetime.fromisoformat(text) if isinstance(text, str) else None
