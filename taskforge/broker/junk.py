"""Reading the shared keys forgiving junk: one decoding layer for every reader, the job record's included.

Any key in Redis may hold what taskforge never wrote: edited by hand, written
by another program sharing the database, left by a bug. A reader (the worker,
``status``, the dashboard, the metrics, the KEDA endpoint) must not stop on
it: a junk entry is skipped, or read as the documented default, with one
WARNING naming the key, the first time this process meets junk there (a
dashboard refreshed every few seconds would otherwise fill the log).

The decoders of single values are the job record's (``record_values.py``);
this module adds the key to warn about, and the reads whose whole reply can
be junk (``WRONGTYPE``: the key is of another type).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

import redis

from ..errors import ConfigurationError
from . import keys, record_values

log = logging.getLogger("taskforge.broker")

T = TypeVar("T")

# Per process by design: "once" means one line per key for as long as the
# process runs, whichever app or client met the junk. Bounded, so a flood of
# distinct junk keys (a key per job) cannot grow it without end.
_warned: set[str] = set()
_lock = threading.Lock()
WARNED_MAX = 10_000


def set_aside(key: str | bytes, what: str) -> None:
    """Say once per process that ``key`` holds junk (``what``), which the reader skipped or read as a default."""
    name = key.decode(errors="backslashreplace") if isinstance(key, bytes) else key
    with _lock:
        if name in _warned or len(_warned) >= WARNED_MAX:
            return
        _warned.add(name)
    log.warning(
        "%s holds %s, which taskforge never writes: skipped (said once per process). Inspect it "
        "(redis-cli TYPE / DUMP) and DEL it or the entry if nothing needs it.",
        name.encode("unicode_escape").decode("ascii"),
        what,
    )


def text(raw: object, key: str | bytes) -> str | None:
    """UTF-8 text, or None (set aside) for bytes that are not."""
    if isinstance(raw, str):
        return raw
    if not isinstance(raw, bytes):
        return None
    try:
        return raw.decode()
    except UnicodeDecodeError:
        set_aside(key, f"an entry that is not UTF-8 ({raw[:40]!r})")
        return None


def texts(raws: Iterable[object], key: str | bytes) -> list[str]:
    """Members as text, the ones that are not UTF-8 left out."""
    out = []
    for raw in raws:
        value = text(raw, key)
        if value is not None:
            out.append(value)
    return out


def number(raw: object, key: str | bytes, default: int = 0) -> int:
    """An integer; junk (set aside) and none read as ``default``."""
    if raw is None or raw == b"":
        return default
    if isinstance(raw, float):
        if raw != raw or raw in (float("inf"), float("-inf")):
            set_aside(key, f"a number out of range ({raw})")
            return default
        return int(raw)
    value = record_values.number(raw if isinstance(raw, (bytes, int)) else None)
    if value is None:
        set_aside(key, f"a value that is not a number ({raw!r:.60})")
        return default
    return value


def count(raw: object, key: str | bytes) -> int:
    """A count: junk, none and negatives read as 0."""
    return max(0, number(raw, key))


def json_value(raw: object, key: str | bytes, default: T, kind: type | tuple[type, ...]) -> T | Any:
    """JSON of type ``kind``; junk (set aside) and none read as ``default``."""
    if raw is None:
        return default
    try:
        value = json.loads(raw) if isinstance(raw, (bytes, str)) else None
    except (ValueError, UnicodeDecodeError):
        value = None
    if not isinstance(value, kind):
        set_aside(key, f"a value that is not the JSON expected ({raw!r:.60})")
        return default
    return value


def reply(value: object, key: str | bytes, default: T) -> T | Any:
    """One reply of a pipeline run with ``raise_on_error=False``: an error (the key is of another type) reads as
    ``default``, set aside."""
    if isinstance(value, redis.ResponseError):
        set_aside(key, "the wrong type of value")
        return default
    return value


def replies(values: Sequence[object], keys: Sequence[str], defaults: Sequence[object] | object) -> list[Any]:
    """``reply`` over a pipeline's replies, key by key; one default for all, or one per reply."""
    if isinstance(defaults, (list, tuple)):
        return [reply(v, k, d) for v, k, d in zip(values, keys, defaults, strict=True)]
    return [reply(v, k, defaults) for v, k in zip(values, keys, strict=True)]


def read(call: Callable[[], Any], key: str | bytes, default: Any) -> Any:
    """``call()``; a Redis error about the key's type reads as ``default``, set aside."""
    try:
        return call()
    except redis.ResponseError as exc:
        if not wrong_type(exc, key):
            raise
        return default


def or_default(key: str | bytes, default: Any) -> Callable[[redis.ResponseError], Any]:
    """``read`` for a plan's command (``plan.Command.on_error``): an error about the key's type reads as
    ``default``, set aside; any other is raised again."""

    def on_error(exc: redis.ResponseError) -> Any:
        if not wrong_type(exc, key):
            raise exc
        return default

    return on_error


def wrong_type(exc: redis.ResponseError, key: str | bytes) -> bool:
    """Whether ``exc`` says that ``key`` is of another type (then set aside): a reader goes on without it."""
    if "WRONGTYPE" not in str(exc):
        return False
    set_aside(key, "the wrong type of value")
    return True


def queue_names(raw: Iterable[object]) -> list[str]:
    """The members of the queue registry that name a queue, sorted; the others set aside.

    Every command and page starts from this set: one member that is not
    UTF-8, or not a name a queue can have, must not take them all down.
    """
    names = []
    for name in texts(raw, keys.QUEUES):
        try:
            names.append(keys.validate_queue_name(name))
        except ConfigurationError:
            set_aside(keys.QUEUES, f"a member that is no queue name ({name[:40]!r})")
    return sorted(names)


def said(key: str | bytes) -> bool:
    """Whether junk in ``key`` was already reported by this process (for tests)."""
    name = key.decode(errors="backslashreplace") if isinstance(key, bytes) else key
    return name in _warned
