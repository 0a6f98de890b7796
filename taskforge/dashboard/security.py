"""Who may look and who may act: HTTP Basic auth on everything, and CSRF tokens on every action.

With ``--auth``, a browser sends the credentials with every request to the
dashboard, including requests a hostile page makes it send; so every action
is a POST that must also carry a token only the dashboard's own pages know
(a double-submit cookie: the form field must equal a ``SameSite=Strict``
cookie another site can neither read nor make the browser send). A
request whose ``Origin`` names another site, or ``null``, never gets this
far: ``hosts.HostCheck`` refuses it, and any request to a ``Host`` not
allowed, first.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import secrets
from typing import Any
from urllib.parse import parse_qsl

from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from ..errors import ConfigurationError

CSRF_COOKIE = "taskforge_csrf"
CSRF_FIELD = "csrf"
MAX_FORM = 64 * 1024


def parse_auth(value: str) -> tuple[str, str]:
    """``user:password`` -> (user, password); anything else is a usage error."""
    user, sep, password = value.partition(":")
    if not sep or not user or not password:
        # The value is never echoed: it may be a password typed without its user.
        raise ConfigurationError("--auth: use USER:PASSWORD, both non-empty (the password may contain ':')")
    return user, password


class BasicAuth:
    """ASGI middleware: every request (pages, actions, API, static files) needs the credentials."""

    def __init__(self, app: ASGIApp, user: str, password: str) -> None:
        self.app = app
        self.expected = f"{user}:{password}".encode()

    def allowed(self, scope: Scope) -> bool:
        for name, value in scope.get("headers", []):
            if name == b"authorization":
                scheme, _, token = value.partition(b" ")
                if scheme.lower() != b"basic":
                    return False
                try:
                    given = base64.b64decode(token.strip(), validate=True)
                except (binascii.Error, ValueError):
                    return False
                return hmac.compare_digest(given, self.expected)
        return False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self.allowed(scope):
            await self.app(scope, receive, send)
            return
        response = PlainTextResponse(
            "authentication required\n",
            status_code=401,
            headers={"WWW-Authenticate": 'Basic realm="taskforge", charset="UTF-8"'},
        )
        await response(scope, receive, send)


async def read_form(request: Request) -> dict[str, str]:
    """The fields of a url-encoded form (all the dashboard's forms are), first value of each.

    Parsed here rather than through Starlette's form support, which needs
    python-multipart, a dependency for file uploads the dashboard never takes.
    """
    body = await request.body()
    if len(body) > MAX_FORM:
        return {}
    pairs = parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True)
    form: dict[str, str] = {}
    for name, value in pairs:
        form.setdefault(name, value)
    return form


def csrf_token(request: Request) -> str:
    """The token of this browser: its cookie's, or a fresh one that the response will set."""
    token = request.cookies.get(CSRF_COOKIE, "")
    if len(token) != 64:
        token = request.state.new_csrf = secrets.token_hex(32)
    return token


def set_csrf_cookie(request: Request, response: Any) -> None:
    token = getattr(request.state, "new_csrf", None)
    if token:
        response.set_cookie(CSRF_COOKIE, token, httponly=True, samesite="strict", path="/")


def csrf_problem(request: Request, form: dict[str, str]) -> str | None:
    """Why this POST must be refused, or None when it comes from the dashboard's own page."""
    # The Origin (and Referer) of every request were checked already, against the allowed hosts (hosts.py).
    cookie = request.cookies.get(CSRF_COOKIE, "")
    given = form.get(CSRF_FIELD, "")
    if not cookie or not hmac.compare_digest(cookie.encode(), given.encode()):
        return "missing or wrong CSRF token: reload the page and try again"
    return None
