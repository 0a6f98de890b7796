"""Which import path a job may make a worker import: only one this project's backend enqueued.

A Django task travels as its import path, and a path is data from Redis:
anyone who can write to Redis could name any module, and importing a module
runs its code, whatever ``isinstance`` says after. So a path is imported only
when the job carries the HMAC the enqueuing backend made of it with the
project's ``SECRET_KEY`` (or one of ``SECRET_KEY_FALLBACKS``, for a key being
rotated). A path without a valid one is looked up among the modules already
imported, never imported (``ImportError`` when it is not there, as for a path
that does not import); either way the object found must be a ``Task``.
"""

from __future__ import annotations

import sys
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured, SuspiciousOperation
from django.utils.crypto import constant_time_compare, salted_hmac
from django.utils.module_loading import import_string

SALT = "taskforge.contrib.django.task-path"
MAC = "path_mac"  # the key of the HMAC in the job's meta (its fifth argument)
_MISSING = object()


def path_mac(path: str, secret: str | bytes | None = None) -> str | None:
    """The HMAC that vouches for ``path``; None when the project has no ``SECRET_KEY``."""
    try:
        return str(salted_hmac(SALT, path, secret=secret, algorithm="sha256").hexdigest())
    except ImproperlyConfigured:
        return None


def vouched(path: str, mac: object) -> bool:
    """``mac`` was made of ``path`` with this project's secret key, or a fallback of it."""
    if not isinstance(mac, str):
        return False
    try:
        secrets = [settings.SECRET_KEY, *getattr(settings, "SECRET_KEY_FALLBACKS", ())]
    except ImproperlyConfigured:
        return False
    return any(constant_time_compare(mac, path_mac(path, secret) or "") for secret in secrets)


def loaded(path: str) -> Any:
    """The object at ``path`` among the modules already imported; ImportError when there is none."""
    parts = path.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        found: Any = sys.modules.get(".".join(parts[:cut]))
        if found is None:
            continue
        for name in parts[cut:]:
            found = getattr(found, name, _MISSING)
            if found is _MISSING:
                break
        else:
            return found
    raise ImportError(
        f"{path!r} is not vouched for by this project's SECRET_KEY and names nothing already imported: not imported"
    )


def resolve(path: str, meta: dict[str, Any]) -> Any:
    """What ``path`` names: imported only when the job's meta vouches for it (``vouched``)."""
    if not isinstance(path, str) or not path:
        raise SuspiciousOperation(f"{path!r} is not an import path")
    return import_string(path) if vouched(path, meta.get(MAC)) else loaded(path)
