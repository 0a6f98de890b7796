"""Limits shared by several tasks: ``app.limit("screens", concurrency=1)`` and ``@app.task(limits=["screens"])``.

A named limit caps, across all workers, the runs of every task that names
it, as a task's own ``concurrency=``/``rate_limit=`` caps its own runs. The
scripts count it within one queue's keys (every key of a queue shares one
hash tag, so each script stays in one Redis Cluster slot): a limit's tasks
must therefore all be in one queue, which is checked when a task naming it
is registered, and when ``with_options`` sends one of its jobs elsewhere.
A task names only limits defined before it, so a typo fails at import.

What a job carries: its task's limits text (``TaskOptions.limit_text``),
the task's own "rate:period_ms:concurrency" followed by "|name=..." for each
shared limit it names, so that the claim counts a start against each and a
job sent by name obeys them once a worker has published its task's text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from .bounds import checked_count
from .errors import ConfigurationError
from .task_options import TaskOptions, limits_text, parse_rate_limit

_NAME = re.compile(r"^[A-Za-z0-9_.\-]{1,100}$")  # no '|' nor '=': the limits text's separators


def limit_name(name: object) -> str:
    """A limit's name, checked: letters, digits, '_', '.', '-', at most 100 characters."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise ConfigurationError(f"limit name {name!r}: use letters, digits, '_', '.' or '-' (at most 100 characters)")
    return name


def limit_names(option: str, value: object) -> tuple[str, ...]:
    """``limits=[...]`` of ``@app.task``: the names, checked, each once, in the order given."""
    if isinstance(value, str) or not isinstance(value, (list, tuple)):
        raise ConfigurationError(f"{option}={value!r}: use a list of limit names, e.g. limits=['screens']")
    return tuple(dict.fromkeys(limit_name(name) for name in value))


@dataclass(frozen=True)
class NamedLimit:
    """One ``app.limit``: its name and caps."""

    name: str
    concurrency: int
    rate: tuple[int, float] | None

    @property
    def text(self) -> str:
        """As the scripts read it after a task's own limits: "|name=rate:period_ms:concurrency"."""
        return f"|{self.name}={limits_text(self.rate, self.concurrency)}"


class NamedLimits:
    """An app's named limits, and the queue each one is held in (its first task's)."""

    def __init__(self) -> None:
        self.defined: dict[str, NamedLimit] = {}
        self.held_in: dict[str, tuple[str, str]] = {}  # limit name -> (queue, the first task naming it)

    def define(self, name: str, concurrency: int | None, rate: str | None) -> None:
        """``app.limit``: a new limit, or the same one again (a module imported twice); never another one."""
        limit = NamedLimit(
            limit_name(name),
            0 if concurrency is None else checked_count("concurrency", concurrency),
            None if rate is None else parse_rate_limit(rate, "rate"),
        )
        if not limit.concurrency and limit.rate is None:
            raise ConfigurationError(f"app.limit({name!r}) caps nothing: give concurrency=N, rate='N/unit' or both")
        known = self.defined.get(name)
        if known is not None and known != limit:
            raise ConfigurationError(f"app.limit({name!r}) is already defined with other caps: give it another name")
        self.defined[name] = limit

    def resolve(self, task: str, options: TaskOptions) -> TaskOptions:
        """The options of task ``task`` with the limits it names written out; ConfigurationError when one is
        unknown or held in another queue than this task's."""
        if not options.limits:
            return options
        for name in options.limits:
            if name not in self.defined:
                raise ConfigurationError(
                    f"task {task!r} names limit {name!r}, which is not defined: call "
                    f"app.limit({name!r}, concurrency=..., rate=...) before the task's definition"
                )
            queue, first = self.held_in.get(name, (options.queue, task))
            if queue != options.queue:
                raise ConfigurationError(
                    f"limit {name!r} is shared by task {first!r} in queue {queue!r} and task {task!r} in queue "
                    f"{options.queue!r}: a named limit holds within one queue, so put its tasks in one queue"
                )
        for name in options.limits:
            self.held_in.setdefault(name, (options.queue, task))
        return replace(options, shared_limits="".join(self.defined[name].text for name in options.limits))


def check_queue(options: TaskOptions, queue: str) -> None:
    """``with_options(queue=...)`` of a task naming shared limits: refused for another queue, where its jobs
    would not count against them."""
    if options.limits and queue != options.queue:
        raise ConfigurationError(
            f"with_options(queue={queue!r}): this task's runs count against limits {list(options.limits)} held in "
            f"queue {options.queue!r}; a job in another queue would escape them"
        )
