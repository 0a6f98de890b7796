"""The ``@app.task`` options, declared once: each one's name, type, default, check and one-line doc.

``DecoratorOptions`` is the one list. From it come the names ``@app.task``
takes (``OPTION_NAMES``), the check each value gets and what a job keeps of
it (``build()`` at decoration, ``for_call()`` for ``Task.with_options``,
``check_option()`` for the Django backend's queues), which of them
``with_options`` takes for one call (``per_call``), and the options table of
the docs (``options_table()``). Before, the list was
written out four times and a new option had to be added to each by hand.

Two copies stay written out, because a user's type checker reads only
signatures: the decorator's typed overload in ``app.py`` and the signature
of ``Task.with_options`` (and ``apply_async``, which hands its ``queue`` and
``priority`` on to it). ``tests/test_option_list.py`` holds them to this
declaration: a name, a type or a default that differs fails it.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from datetime import datetime, timedelta
from typing import Any

from .bounds import checked_count, checked_seconds
from .broker.keys import validate_queue_name
from .errors import ConfigurationError
from .job import BackoffPolicy, Priority, backoff_policy
from .named_limits import limit_names
from .task_options import UNIQUE_DEFAULT_TTL, TaskOptions, exception_classes, parse_expires, parse_rate_limit


class Keep(enum.Enum):
    """``with_options``'s default for an option whose None has a meaning of its own (``timeout=None``: none)."""

    KEEP = 0


Parse = Callable[[str, Any], Any]  # (option, value given) -> what TaskOptions keeps; ConfigurationError if refused


@dataclass(frozen=True)
class Option:
    """What the declaration says of one option besides its name, type and default."""

    default: Any
    doc: str  # its line in the options table
    shown: str  # its default as the table shows it
    parse: Parse | None  # None: kept as given
    empty: Any = None  # what TaskOptions keeps when the option is left at its default None
    stored: bool = True  # TaskOptions has a field of this name (``name``, ``backoff`` and ``unique`` are not kept)
    per_call: bool = False  # ``with_options`` takes it for one call too
    keep: Any = None  # ``with_options``'s default: leave the task's own value
    worker_defined: bool = False  # a job sent by name takes it from the worker's definition unless given

    def value(self, option: str, given: Any) -> Any:
        """What TaskOptions keeps for ``option=given``; ConfigurationError naming the option if it is refused."""
        if given is None and self.default is None:
            return self.empty
        return given if self.parse is None else self.parse(option, given)


def option(default: Any, doc: str, shown: str = "none", parse: Parse | None = None, **more: Any) -> Any:
    """A field of ``DecoratorOptions``: its default, with the rest of the declaration in its metadata."""
    return field(default=default, metadata={"option": Option(default, doc, shown, parse, **more)})


def _task_name(option: str, name: object) -> str:
    if not isinstance(name, str) or not name.strip():
        raise ConfigurationError(f"task name {name!r}: use a non-empty string")
    return name


def _callable(option: str, value: object) -> object:
    if not callable(value):
        raise ConfigurationError(f"{option}={value!r}: use a callable taking the task's arguments")
    return value


def _key(option: str, key: object) -> object:
    if not callable(key) and not (isinstance(key, str) and key):
        raise ConfigurationError(
            f"key={key!r}: use the name of one of the task's parameters, or a callable of its arguments returning a str"
        )
    return key


def _seconds_or_none(option: str, value: object) -> float:
    return checked_seconds(option, value, ", or None")


def _total_runs(option: str, value: object) -> int:
    return checked_count(option, value, hint=" (total runs)")


@dataclass(frozen=True)
class DecoratorOptions:
    """The keyword options of ``@app.task``, as the caller gives them (``TaskOptions`` is what a job keeps)."""

    name: str | None = option(
        None,
        "the name jobs carry; the same whether the module runs as a script or is imported",
        "`module.qualname`",
        _task_name,
        stored=False,
    )
    queue: str = option(
        "default",
        "printable, no spaces, no `{` or `}`, at most 200 characters",
        '`"default"`',
        lambda _, value: validate_queue_name(value),
        per_call=True,
    )
    priority: Priority | str | int = option(
        Priority.NORMAL,
        "a `Priority` or its name in any case",
        "`normal`",
        lambda _, value: Priority.parse(value),
        per_call=True,
    )
    max_attempts: int = option(
        3,
        "total runs, including the first: **every exception is retried by default** until then "
        "(Celery retries nothing unless asked; `max_attempts=1` for that)",
        "3",
        _total_runs,
        per_call=True,
        worker_defined=True,
    )
    max_worker_losses: int = option(
        2,
        "runs that may lose their worker (`kill -9`, a lost host, a child process that died: "
        "segfault, `os._exit`, out of memory) before the job ends dead as `WorkerLost`; such a run "
        "uses no attempt, so `max_attempts=1` still survives a `kill -9`; 0: the first loss ends it",
        "2",
        lambda name, value: checked_count(name, value, low=0, hint=" (lost runs allowed)"),
        per_call=True,
        worker_defined=True,
    )
    timeout: float | None = option(
        None,
        "seconds a run may take before the worker kills it",
        parse=_seconds_or_none,
        per_call=True,
        keep=Keep.KEEP,
        worker_defined=True,
    )
    backoff: float | BackoffPolicy = option(
        1.0,
        "base seconds of exponential backoff with jitter (doubling per attempt, capped at 1 h), "
        "or a callable `attempt -> seconds`",
        "1",
        lambda _, value: backoff_policy(value),
        stored=False,
    )
    unique: bool = option(
        False,
        "while a job of the task with the same arguments is pending, scheduled, retrying or running, "
        "`delay()` returns its handle instead of storing another",
        "off",
        lambda _, value: bool(value),
        stored=False,
    )
    unique_for: float | None = option(
        None,
        "seconds the `unique` lock lives at most, so a crash never leaves it behind for longer; implies `unique`",
        "24 h",
        checked_seconds,
    )
    unique_key: Callable[..., Any] | None = option(
        None,
        "a callable of the call's arguments whose answer the `unique` lock is taken on; implies `unique`",
        "the arguments",
        _callable,
    )
    rate_limit: str | None = option(
        None,
        '`"N/unit"` (`s`, `m`, `h`, `d`, or `"5/10s"`): at most N starts in any such window, across all workers',
        parse=lambda name, value: parse_rate_limit(value, name),
    )
    concurrency: int | None = option(
        None, "at most this many jobs of the task run at once, across all workers", parse=checked_count, empty=0
    )
    retry_on: type[BaseException] | tuple[type[BaseException], ...] | None = option(
        None,
        "an exception class or a tuple: only these are retried, any other ends the job dead at once, its error "
        "saying so (`KeyError: 'x' (KeyError is not retried)`); Celery's `autoretry_for`",
        "every exception",
        exception_classes,
        per_call=True,
    )
    dont_retry_on: type[BaseException] | tuple[type[BaseException], ...] | None = option(
        None,
        "an exception class or a tuple that ends the job dead at once; not together with `retry_on`; "
        "Celery's `dont_autoretry_for`",
        parse=exception_classes,
        empty=(),
        per_call=True,
    )
    soft_timeout: float | None = option(
        None,
        "seconds after which `SoftTimeout` is raised inside the running task (below `timeout`, which still "
        "kills); the task may catch it to clean up and return; uncaught, the run fails with it; "
        "Celery's `soft_time_limit`",
        parse=_seconds_or_none,
    )
    expires: float | timedelta | datetime | None = option(
        None,
        "seconds after the enqueue, a `timedelta` or an aware `datetime`: a job not started by then (pending, "
        "scheduled or retrying) ends `cancelled` with error and failure `expired`, never run; Celery's `expires`",
        parse=lambda _, value: parse_expires(value),
        per_call=True,
    )
    key: str | Callable[..., str] | None = option(
        None,
        "the job's key: the name of one of the task's parameters (its value, as text) or a callable of the "
        "call's arguments returning a `str`",
        parse=_key,
    )
    debounce: float | None = option(
        None,
        "seconds: a burst of calls per key runs once, with the last arguments, this long after the last call",
        parse=checked_seconds,
    )
    debounce_max_wait: float | None = option(
        None,
        "seconds after a burst's first call by which its job starts however the burst goes on (needs `debounce`)",
        "no cap",
        checked_seconds,
    )
    key_concurrency: int | None = option(
        None,
        "at most this many jobs of the task with one key run at once, across all workers (needs `key`)",
        "no cap",
        checked_count,
        empty=0,
    )
    key_rate_limit: str | None = option(
        None,
        '`"N/unit"`: at most N starts per key in any such window (needs `key`)',
        parse=lambda name, value: parse_rate_limit(value, name),
    )
    limits: list[str] | tuple[str, ...] | None = option(
        None,
        "names of the app's shared limits (`app.limit(name, concurrency=N, rate=...)`, defined before the task) "
        "this task's runs count against, across all workers; a limit's tasks must be in one queue",
        parse=limit_names,
        empty=(),
    )


DECLARED: dict[str, Option] = {f.name: f.metadata["option"] for f in fields(DecoratorOptions)}
OPTION_NAMES = frozenset(DECLARED)  # what @app.task takes; anything else is refused, Celery's names with a hint
PER_CALL = tuple(name for name, declared in DECLARED.items() if declared.per_call)
WORKER_DEFINED = frozenset(name for name, declared in DECLARED.items() if declared.worker_defined)


def check_option(option: str, value: object) -> Any:
    """``option=value`` checked as ``@app.task`` checks it: what a job keeps of it (ConfigurationError if refused)."""
    return DECLARED[option].value(option, value)


def build(given: DecoratorOptions) -> TaskOptions:
    """What a job of the task carries: every option checked, alone then with those it depends on."""
    raw = {name: getattr(given, name) for name in DECLARED}
    _check_pairs(raw)
    kept = {name: declared.value(name, raw[name]) for name, declared in DECLARED.items()}
    _check_order(raw)
    if given.unique or given.unique_for is not None or given.unique_key is not None:
        kept["unique_for"] = kept["unique_for"] or UNIQUE_DEFAULT_TTL
    return TaskOptions(**{name: kept[name] for name, declared in DECLARED.items() if declared.stored})


def for_call(given: Mapping[str, object]) -> tuple[dict[str, Any], bool]:
    """``with_options``: the changes to a task's options that the per-call options given make, checked;
    and whether they must win over the worker's definition of the task.

    An option left at its ``keep`` default keeps the task's own. The retry
    filters go as a pair: given one, the other takes its default (retry every
    exception, or none excluded), and the job record then carries them. The
    bool is True when an option a worker would take from its own definition
    of the task was given: the caller's choice must win over it.
    """
    chosen = {name: value for name, value in given.items() if value is not DECLARED[name].keep}
    retry_filters = "retry_on" in chosen or "dont_retry_on" in chosen
    if retry_filters:
        chosen = {"retry_on": None, "dont_retry_on": None, **chosen}
        _check_pairs(chosen)
    changes = {name: DECLARED[name].value(name, value) for name, value in chosen.items()}
    if retry_filters:
        changes["retry_set_per_call"] = True
    return changes, not WORKER_DEFINED.isdisjoint(chosen)


def _check_pairs(given: Mapping[str, object]) -> None:
    """The options that need or exclude another, refused before any value is parsed."""
    if given.get("retry_on") is not None and given.get("dont_retry_on") is not None:
        raise ConfigurationError(
            "retry_on= and dont_retry_on= together: give one (retry only these, or retry all but these)"
        )
    if given.get("debounce_max_wait") is not None and given.get("debounce") is None:
        raise ConfigurationError("debounce_max_wait= without debounce=: it caps how long a debounce may delay a job")
    per_key = [name for name in ("key_concurrency", "key_rate_limit") if given.get(name) is not None]
    if per_key and given.get("key") is None:
        raise ConfigurationError(
            f"{per_key[0]}= without key=: a per-key limit needs the task's key (key='param' or a callable)"
        )


def _check_order(given: Mapping[str, Any]) -> None:
    """The options bounded by another (each already checked alone): the soft timeout below the hard one,
    the debounce cap not below the debounce."""
    soft, hard = given["soft_timeout"], given["timeout"]
    if soft is not None and hard is not None and soft >= hard:
        raise ConfigurationError(
            f"soft_timeout={soft!r} is not below timeout={hard!r}: the soft one warns the task "
            "before the hard one kills it"
        )
    debounce, cap = given["debounce"], given["debounce_max_wait"]
    if cap is not None and cap < debounce:
        raise ConfigurationError(
            f"debounce_max_wait={cap!r} is below debounce={debounce!r}: the cap must leave room for one delay"
        )


def options_table() -> str:
    """The options table of the docs, one row per declared option, in declaration order."""
    rows = [f"| `{name}` | {declared.shown} | {declared.doc} |" for name, declared in DECLARED.items()]
    return "\n".join(["| option | default | meaning |", "|---|---|---|", *rows])
