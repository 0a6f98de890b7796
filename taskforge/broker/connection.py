"""From a broker URL to a Redis client, and Redis errors to ``BrokerUnavailable``.

Schemes: ``redis://``, ``rediss://`` (TLS), ``unix://``, ``memory://`` (an
in-process fakeredis server running the same Lua scripts, private to the app
that opened it), and ``redis+cluster://`` and ``redis+sentinel://`` (see
``scaled.py``).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from types import TracebackType
from typing import Any, TypeVar
from urllib.parse import urlsplit

import redis
from redis.backoff import ExponentialBackoff
from redis.maint_notifications import MaintNotificationsConfig
from redis.retry import Retry

from ..errors import BrokerUnavailable, ConfigurationError
from ._sync.handshake import try_once, version_check
from .compat import MINIMUM_TEXT, unknown_command
from .redaction import redact as redact  # every output path hides passwords through this one function
from .redaction import unsafe_userinfo
from .scaled import CLUSTER, SCALED_SCHEMES, SENTINEL, cluster_client, sentinel_client

DEFAULT_URL = "redis://localhost:6379/0"

T = TypeVar("T")


_resends = threading.local()


def resends() -> int:
    """How many commands redis-py has sent again on this thread after a connection error."""
    return int(getattr(_resends, "count", 0))


def count_resend() -> None:
    """A command of this thread goes again after a connection error (``direct.py``, as redis-py's retry)."""
    _resends.count = resends() + 1


def sending_once() -> bool:
    """Inside ``sent_once()``: a failed command is raised, not sent again."""
    return bool(getattr(_resends, "once", False))


@contextmanager
def sent_once() -> Iterator[None]:
    """Commands on this thread are sent at most once: a connection error is raised, not retried.

    For a write that is not idempotent as sent (a plain enqueue skips the
    "is this id stored already?" check): the caller retries it itself, marked
    as a re-send, instead of redis-py sending the same arguments again.
    """
    before = getattr(_resends, "once", False)
    _resends.once = True
    try:
        yield
    finally:
        _resends.once = before


class CountingRetry(Retry):
    """redis-py's retry, counting each failed try on the calling thread.

    redis-py re-sends a command whose connection failed with the same
    arguments, so a claim whose reply was lost is re-sent without the retry
    flag that would hand its jobs back; the broker compares ``resends()``
    around a claim and, when it moved, asks for the token's jobs itself.
    """

    def call_with_retry(self, do: Any, fail: Any, *args: Any, **kwargs: Any) -> Any:
        if getattr(_resends, "once", False):
            # Inside sent_once(): a failed command is not re-sent behind the caller's back.
            return try_once(self._supported_errors, do, fail, kwargs)

        def counted(*failure: Any) -> Any:
            _resends.count = resends() + 1
            return fail(*failure)

        return super().call_with_retry(do, counted, *args, **kwargs)


ENV_VAR = "TASKFORGE_BROKER_URL"
SCHEMES = ("redis", "rediss", "unix", "memory", *SCALED_SCHEMES)

# Commands fail within seconds, not minutes, when Redis is gone or hung; blocking
# reads of the worker ask for less than SOCKET_TIMEOUT.
CONNECT_TIMEOUT = 3.0
SOCKET_TIMEOUT = 10.0


def resolve_url(url: str | None) -> str:
    """The documented order (docs/reference/broker-url.md): the argument, else the environment, else localhost."""
    return url or os.environ.get(ENV_VAR) or DEFAULT_URL


def url_scheme(url: str) -> str:
    """The scheme of ``url`` (lower case), once the URL is known safe to parse; ConfigurationError if not.

    For the sync and the async client alike. A password holding an unescaped
    ``/``, ``?`` or ``#`` is refused here, before a parser reads a piece of it
    as a host or a port and names it in an error.
    """
    if unsafe_userinfo(url):
        raise ConfigurationError(
            f"broker URL {redact(url)!r} is invalid: its password (or user name) holds a '/', '?' or '#', "
            "which ends the host part of a URL; write it %-escaped, as urllib.parse.quote(password, safe='') "
            "does (an '@' after the host, in a query value, is written %40)"
        )
    try:
        scheme = urlsplit(url).scheme
    except ValueError as exc:
        raise ConfigurationError(f"broker URL {redact(url)!r} is invalid: {redact(str(exc))}") from None
    if scheme not in SCHEMES:
        raise ConfigurationError(
            f"broker URL {redact(url)!r}: unknown scheme {scheme!r}; use one of "
            "redis://, rediss://, unix://, memory://, redis+cluster:// or redis+sentinel://"
        )
    return scheme


def connect(url: str) -> redis.Redis | redis.RedisCluster:
    """A client for ``url``; raises ConfigurationError for an unusable URL."""
    scheme = url_scheme(url)
    if scheme == "memory":
        return _memory_client()
    options: dict[str, object] = {
        "socket_connect_timeout": CONNECT_TIMEOUT,
        "socket_timeout": SOCKET_TIMEOUT,
        "health_check_interval": 30,
        "retry": CountingRetry(ExponentialBackoff(cap=0.5, base=0.05), 2),
    }
    if scheme not in SCALED_SCHEMES:
        options.update(quiet_handshake(redact(url)))
    if scheme != "unix":  # unix sockets have no TCP keepalive; redis-py refuses the option
        options["socket_keepalive"] = True
    try:
        if scheme == CLUSTER:  # connects now, to learn the slot map
            with broker_errors(url):
                return cluster_client(url, redact(url), options)
        if scheme == SENTINEL:
            return sentinel_client(url, redact(url), options)
        return redis.Redis.from_url(url, **options)
    except ValueError as exc:
        raise ConfigurationError(f"broker URL {redact(url)!r} is invalid: {redact(str(exc))}") from None


def quiet_handshake(shown_url: str) -> dict[str, object]:
    """Connection options: no handshake command a minimal ACL user is denied, and a check of the version.

    redis-py's own handshake sends ``CLIENT SETINFO`` (denied on 7.2+ and
    Valkey, and on 6.2 where every ``CLIENT`` subcommand is one command) and,
    under RESP3, ``CLIENT MAINT_NOTIFICATIONS`` (denied on 6.2). It ignores
    the errors, but each leaves an entry in the server's ACL LOG per
    connection; neither is of use to taskforge. The version check runs
    once per client (see ``_async/handshake.py``).
    """
    return {
        "driver_info": None,
        "maint_notifications_config": MaintNotificationsConfig(enabled=False),
        "redis_connect_func": version_check(shown_url),
    }


def _memory_client() -> redis.Redis:
    try:
        import fakeredis
        import lupa  # noqa: F401  (fakeredis runs Lua through it)
    except ImportError as exc:  # pragma: no cover - both are dependencies
        raise ConfigurationError(f"memory:// needs fakeredis with Lua support: {exc}") from None
    from .fakelua import compile_once

    server = fakeredis.FakeServer()
    compile_once(server)
    return fakeredis.FakeRedis(server=server)


# Replies that mean "Redis is there but cannot serve this now": a script of
# someone else's running too long, a replica after failover, memory full,
# loading a dataset, a cluster resharding. Callers treat them like an outage
# (back off, retry), never as a bug that should crash a worker.
TRANSIENT_REPLIES = (
    "BUSY",
    "READONLY",
    "OOM",
    "NOREPLICAS",
    "MASTERDOWN",
    "LOADING",
    "TRYAGAIN",
    "CLUSTERDOWN",
    "MISCONF",
)


def is_transient(exc: redis.ResponseError) -> bool:
    """Also ``NOSCRIPT`` once ``with_scripts_loaded`` gave up: a server that keeps losing its scripts is restarting."""
    return str(exc).split(" ", 1)[0].upper() in TRANSIENT_REPLIES or isinstance(
        exc, (redis.exceptions.ReadOnlyError, redis.exceptions.OutOfMemoryError, redis.exceptions.NoScriptError)
    )


# How many times a script call goes out with its script loaded first. NOSCRIPT
# right after a load means the server lost its scripts in between (it restarted,
# a replica took over, someone ran SCRIPT FLUSH): the script ran nowhere, so
# loading and sending again is safe, and a second such moment in a row is rare.
SCRIPT_LOADS = 3


def with_scripts_loaded(send: Callable[[], T], load: Callable[[], object]) -> T:
    """After ``send()`` met NOSCRIPT: ``load()`` and send again, up to ``SCRIPT_LOADS`` loads.

    Still NOSCRIPT after that: raised, and ``broker_errors`` reports it as the
    broker being unable to serve requests right now (callers back off and retry).
    """
    for _ in range(SCRIPT_LOADS - 1):
        load()
        try:
            return send()
        except redis.exceptions.NoScriptError:
            continue
    load()
    return send()


def run_script(client: Any, script: Any, keys: list[str], argv: list[Any]) -> Any:
    """One EVALSHA of redis-py ``script`` through ``client``'s command path (its retry, a
    Sentinel's failover), loading the script whenever the server has lost it."""

    def send() -> Any:
        return client.evalsha(script.sha, len(keys), *keys, *argv)

    try:
        return send()
    except redis.exceptions.NoScriptError:
        return with_scripts_loaded(send, lambda: client.script_load(script.script))


class OnError:
    """``with OnError(manager, *args):`` acts as ``with manager(*args):`` but is built only when something is raised.

    The error translations below are generator context managers, about
    1.5 µs each to enter and leave; every job goes through three of them on
    its hot path, for translations that matter only once something failed.
    """

    __slots__ = ("manager", "args")

    def __init__(self, manager: Callable[..., AbstractContextManager[None]], *args: Any) -> None:
        self.manager = manager
        self.args = args

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> bool:
        if exc is None:
            return False
        manager = self.manager(*self.args)
        manager.__enter__()
        return bool(manager.__exit__(kind, exc, tb))  # translated, passed on, or swallowed: as it says


@contextmanager
def broker_errors(url: str) -> Iterator[None]:
    """Turn redis-py's connection errors (and transient replies) into one clear ``BrokerUnavailable``."""
    try:
        yield
    except redis.AuthenticationError as exc:
        raise BrokerUnavailable(
            f"the broker at {redact(url)} refused the credentials ({redact(str(exc))}); "
            "check the user and password in the URL"
        ) from None
    except (redis.ConnectionError, redis.TimeoutError, redis.exceptions.RedisClusterException) as exc:
        raise BrokerUnavailable(
            f"cannot reach the broker at {redact(url)} ({exc.__class__.__name__}: "
            f"{redact(str(exc))}); check that Redis is running there, or set "
            f"{ENV_VAR} / broker= to the right URL"
        ) from None
    except redis.exceptions.NoPermissionError as exc:
        raise BrokerUnavailable(
            f"the broker at {redact(url)} refused a command: the Redis user lacks a permission "
            f"({redact(str(exc))}); grant the ACL rules of docs/reference/acl.md ('A Redis user for taskforge')"
        ) from None
    except redis.ResponseError as exc:
        missing = unknown_command(str(exc))
        if missing is not None:
            raise ConfigurationError(
                f"the broker at {redact(url)} does not know the command {missing.upper()!r}: "
                f"taskforge needs {MINIMUM_TEXT} or later"
            ) from None
        if not is_transient(exc):
            raise
        raise BrokerUnavailable(
            f"the broker at {redact(url)} cannot serve requests right now ({redact(str(exc))}); retry later"
        ) from None
