"""Which names the dashboard answers to, and which pages may talk to it: the defence against DNS rebinding.

A page on ``evil.example`` whose name an attacker re-points at 127.0.0.1
makes the browser send requests to the dashboard that carry
``Host: evil.example`` and ``Origin: http://evil.example``; the browser
treats them as same-origin, so the page reads every answer. Comparing the
``Origin`` with the ``Host`` (as a CSRF check does) lets that through: both
name the attacker. So the ``Host`` of every request must be on an
allow-list (the loopback names and addresses, the address the dashboard
was bound to when that is a single address, and each ``--allow-host``),
whatever its port; and a request whose ``Origin`` (or, for an action,
``Referer``) is present must come from that same origin, or from a page
of a name given with ``--allow-host`` (a proxy's public name).
``Origin: null`` (sandboxed frames, ``data:`` and ``file:`` pages, some
redirects) names no one and is refused.

The check runs before Basic auth: a refused name gets 400 and never a
password prompt.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from ..errors import ConfigurationError
from ..printable import printable

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
WILDCARDS = ("", "0.0.0.0", "::")  # "every address": no single name the browser would send
SAFE_METHODS = ("GET", "HEAD", "OPTIONS")
WEB_SCHEMES = ("http", "https", "ws", "wss")
SHOWN = 100  # characters of a refused header echoed in the reason


def host_and_port(netloc: str) -> tuple[str, int | None] | None:
    """``name[:port]`` or ``[v6]:port`` as (name: lower-case, no brackets or trailing dot; port); None if malformed."""
    if not netloc or any(c in netloc for c in "@/?#\\ \t"):
        return None
    try:
        parts = urlsplit("//" + netloc)
        port = parts.port
    except ValueError:
        return None
    name = (parts.hostname or "").rstrip(".")
    return (name, port) if name else None


def normalize_name(name: str) -> str:
    """One ``--allow-host`` value: a host name or address, without scheme or port."""
    text = name.strip().lower().removeprefix("[").removesuffix("]").rstrip(".")
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        pass
    found = host_and_port(text)
    if found is None or found[1] is not None or ":" in text or "*" in text:
        raise ConfigurationError(
            f"--allow-host {printable(name)!r}: give a host name or address (no scheme, port, path or "
            "wildcard: name each host), such as dashboard.example.com or 10.0.0.5"
        )
    return found[0]


@dataclass(frozen=True)
class Allowed:
    """The names a request may be addressed to, and those the operator named (``--allow-host``).

    A page of a vouched name may act whatever port it is on (a proxy serves
    it on 443 and passes the request on to this port); a page of a loopback
    name only from this very origin, as any other program of the machine
    may serve pages on other ports of ``localhost``.
    """

    names: frozenset[str]
    vouched: frozenset[str]

    def answers_to(self, name: str) -> bool:
        if name in self.names:
            return True
        try:
            return ipaddress.ip_address(name).is_loopback  # 127.0.0.2 is this machine as surely as 127.0.0.1
        except ValueError:
            return False


def allowed_hosts(extra: Iterable[str] = (), bound_to: str | None = None) -> Allowed:
    """The loopback names, the bind address when it is one address, and ``extra`` (checked)."""
    vouched = frozenset(normalize_name(name) for name in extra)
    names = set(LOOPBACK_NAMES) | vouched
    if bound_to is not None and bound_to not in WILDCARDS:
        try:
            names.add(normalize_name(bound_to))
        except ConfigurationError:
            pass  # not a name a browser could send; binding to it fails with its own clear error
    return Allowed(frozenset(names), vouched)


class HostCheck:
    """ASGI middleware: refuse a request to a name not allowed, or from a page of another origin."""

    def __init__(self, app: ASGIApp, allowed: Allowed) -> None:
        self.app = app
        self.allowed = allowed

    def refusal(self, scope: Scope) -> tuple[int, str] | None:
        """(status, reason) when the request must be refused, else None."""
        headers: dict[str, list[str]] = {}
        for name, value in scope.get("headers", []):
            headers.setdefault(name.decode("latin-1"), []).append(value.decode("latin-1"))
        hosts = headers.get("host", [])
        host = host_and_port(hosts[0]) if len(hosts) == 1 else None  # two Host headers: which one is meant?
        if host is None or not self.allowed.answers_to(host[0]):
            shown = printable(",".join(hosts)[:SHOWN])
            return 400, (
                f"Host {shown!r} is not one this dashboard answers to "
                f"({', '.join(sorted(self.allowed.names))}); add it with --allow-host NAME"
            )
        origins = headers.get("origin")
        if origins is None and scope.get("method", "GET") not in SAFE_METHODS:
            origins = headers.get("referer")  # a browser that sends no Origin on a POST still sends this
        for origin in origins or ():
            problem = self.origin_problem(origin.strip(), host)
            if problem:
                return 403, problem
        return None

    def origin_problem(self, origin: str, host: tuple[str, int | None]) -> str | None:
        if origin.lower() == "null":
            return "a request from Origin: null (a sandboxed or local page) is refused"
        parts = urlsplit(origin)
        source = host_and_port(parts.netloc) if parts.scheme in WEB_SCHEMES else None
        # Name and port as written, not the scheme: behind a TLS proxy the page is https and the request http.
        if source is None or (source != host and source[0] not in self.allowed.vouched):
            return f"cross-site request from {printable(origin[:SHOWN])} refused"
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        refused = self.refusal(scope) if scope["type"] in ("http", "websocket") else None
        if refused is None:
            await self.app(scope, receive, send)
            return
        status, reason = refused
        response: Response
        if str(scope.get("path", "")).startswith("/api/"):
            response = JSONResponse({"error": reason}, status_code=status)
        else:
            response = PlainTextResponse(reason + "\n", status_code=status)
        await response(scope, receive, send)
