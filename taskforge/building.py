"""Turning one call of a task into the broker's ``NewJob``: serialized, sized, locked if unique.

Every producer path builds its jobs here (``delay`` and friends,
``delay_many``, the periodic scheduler), so a job looks the same whoever
queued it, and none of them needs a private method of ``Task``.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from .broker.record import NewJob
from .errors import ConfigurationError, SerializationError
from .job_ids import new_job_id
from .serialization import dumps_call

if TYPE_CHECKING:
    from .task import Task


def build_job(
    task: Task[Any, Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    *,
    due_ms: int | None = None,
    delay_ms: int = 0,
) -> NewJob:
    """The job for ``task(*args, **kwargs)``; TypeError if the task cannot take those arguments,
    SerializationError if they cannot travel or are too big.

    ``due_ms`` is an absolute time on the producer's clock (``apply_at``),
    ``delay_ms`` a delay resolved on Redis's clock (``apply_in``).
    """
    task.check_call_options(kwargs)  # RQ's depends_on=... named before it fails to serialize
    payload = dumps_call(args, kwargs)  # then: a key that is no str is a SerializationError, as documented
    task.check_call(args, kwargs)
    opts = task.options
    unique_digest, lock_ttl_ms = "", 0
    if opts.unique_for is not None:
        unique_digest = task.unique_lock(args, kwargs, payload)
        lock_ttl_ms = int(opts.unique_for * 1000)
    fields = opts.record_fields()
    expires_at_ms, expires_in_ms = None, 0
    if opts.expires is not None:
        if isinstance(opts.expires, datetime):
            expires_at_ms = int(opts.expires.timestamp() * 1000)
        else:
            expires_in_ms = max(1, int(opts.expires * 1000))
        # An expired job ends cancelled inside the claim script, which has no app to ask.
        fields["keep_ms"] = str(int(getattr(task.app, "retention", 86400) * 1000))
    key = job_key(task, args, kwargs)
    debounce = ""
    if opts.debounce is not None:  # the debounce's delay, on Redis's clock (enqueue.lua: `debounced`)
        due_ms, delay_ms = None, max(1, int(opts.debounce * 1000))
        debounce = f"{delay_ms}:{int((opts.debounce_max_wait or 0) * 1000)}"
    check_size(task, payload, unique_digest, {**fields, "key": key} if key else fields)
    return NewJob(
        id=opts.job_id or new_job_id(),
        task=task.name,
        payload=payload,
        priority=int(opts.priority),
        max_attempts=opts.max_attempts,
        timeout_ms=None if opts.timeout is None else int(opts.timeout * 1000),
        due_ms=due_ms,
        delay_ms=delay_ms,
        inherit=not task.registered,
        limits=opts.limit_text,
        unique_digest=unique_digest,
        lock_ttl_ms=lock_ttl_ms,
        expires_at_ms=expires_at_ms,
        expires_in_ms=expires_in_ms,
        fields=fields or None,
        key=key,
        debounce=debounce,
        key_limits=opts.key_limits if key else "",
    )


def job_key(task: Task[Any, Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    """The job's key ('' for none): ``with_options(key=)``, else the task's ``key=`` option applied to the call.

    A parameter's name gives that argument's value as text (its default when
    the call leaves it out); a callable gets the call's arguments and must
    return a non-empty str. Anything else is an error here: nothing is stored.
    """
    opts = task.options
    if opts.call_key is not None:
        return opts.call_key
    if opts.key is None:
        return ""
    if callable(opts.key):
        try:
            value = opts.key(*args, **kwargs)
        except Exception as exc:
            raise ConfigurationError(
                f"{task.name}: its key= callable raised {type(exc).__name__}: {exc}; nothing was stored"
            ) from exc
        if not isinstance(value, str) or not value:
            raise ConfigurationError(
                f"{task.name}: its key= callable returned {value!r}; return a non-empty str (nothing was stored)"
            )
        return value
    bound = task.bound_call(args, kwargs)
    if bound is None or opts.key not in bound:
        raise ConfigurationError(f"{task.name}: the call gives no {opts.key!r} for key=; nothing was stored")
    return str(bound[opts.key])


def check_size(task: Task[Any, Any], payload: bytes, unique_digest: str, fields: dict[str, str] | None = None) -> None:
    """max_job_size bounds what the job record stores, not only its arguments: a job sent by a
    megabyte-long task name costs Redis as much memory as one with a megabyte argument."""
    limit = task.app.max_job_size
    if not limit:
        return
    opts = task.options
    options = [int(opts.priority), opts.max_attempts, opts.timeout, opts.limit_text, unique_digest, opts.job_id]
    options += (fields or {}).values()
    size = len(payload) + len(task.name.encode()) + sum(len(str(o).encode()) for o in options if o is not None)
    if size > limit:
        what = "arguments" if len(payload) > limit else "task name, options and arguments"
        raise SerializationError(
            f"the job of {task.name[:200]!r} would store {size:,} bytes ({what}), over the "
            f"max_job_size of {limit:,}; pass a reference (a URL, a key) instead of the data"
        )
