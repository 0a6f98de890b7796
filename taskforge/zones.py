"""The app's time zone: how a naive datetime given to ``apply_at`` (or the CLI's ``--at``) is read.

A naive datetime names a wall-clock time but not where. RQ's ``enqueue_at``
reads it as the machine's local time, Celery's ``eta`` in the app's
``timezone`` setting; a job that runs hours early or late is the silent
result of guessing differently. taskforge reads it in the app's time zone,
``TaskForge(timezone=...)``, UTC unless given: never the machine's, so a
producer and a worker on differently configured hosts agree. When the app
was given no time zone the reading is a guess, so the first naive datetime
logs one warning, once per process: a warning per call would bury the logs
of a loop that schedules thousands, and it says everything the first time.

Only ``apply_at``'s times follow the app's zone. ``job.sleep_until`` reads
a naive datetime as UTC, as the durable steps' contract says.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from datetime import datetime, timezone
from datetime import tzinfo as TzInfo  # the field below is named tzinfo, as datetime's own
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from .errors import ConfigurationError

__all__ = ["NAIVE_WARNED", "AppZone"]

log = logging.getLogger("taskforge")

# Once per process, as the contract says, not per app: two apps in one process give one warning.
NAIVE_WARNED = threading.Event()
_warning_lock = threading.Lock()


@dataclass(frozen=True)
class AppZone:
    """The zone a naive datetime is read in, and whether the app chose it (else: UTC, with a warning)."""

    tzinfo: TzInfo
    chosen: bool

    @classmethod
    def of(cls, given: str | TzInfo | None) -> AppZone:
        """``TaskForge(timezone=...)``: an IANA name or a ``tzinfo``; None means UTC, not chosen."""
        if given is None:
            return cls(timezone.utc, chosen=False)
        if isinstance(given, TzInfo):
            return cls(given, chosen=True)
        if isinstance(given, str) and given:
            try:
                return cls(ZoneInfo(given), chosen=True)
            except (ZoneInfoNotFoundError, ValueError, OSError):
                pass
        raise ConfigurationError(
            f"timezone={given!r}: not a known IANA zone name (e.g. 'Europe/Paris', 'UTC') nor a tzinfo"
        )

    def instant(self, when: datetime, where: str) -> datetime:
        """``when`` as an aware datetime: a naive one is read in this zone; ``where`` names the call for the warning."""
        if when.tzinfo is not None and when.utcoffset() is not None:
            return when
        if not self.chosen:
            _warn_once(when, where)
        return when.replace(tzinfo=self.tzinfo)  # a ZoneInfo picks the offset of that date (summer time)


def _warn_once(when: datetime, where: str) -> None:
    with _warning_lock:
        if NAIVE_WARNED.is_set():
            return
        NAIVE_WARNED.set()
    log.warning(
        "%s got a naive datetime (%s) and read it as UTC, as this app sets no time zone: "
        'set TaskForge(timezone=...) (e.g. timezone="Europe/Paris") to say which zone naive times are in, '
        "or give an aware datetime. This warning is logged once per process.",
        where,
        when.isoformat(),
    )
