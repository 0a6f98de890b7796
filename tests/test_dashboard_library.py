"""``taskforge.dashboard.create_app`` as a library: the same allowed hosts as the command, named in its arguments.

Driven through the ASGI interface in this process (no server, no Redis: a
path no route serves, so an allowed request gets 404 and a refused one
400 or 403), outside the dashboard's package, whose browser tests hold an
event loop open.
"""

from __future__ import annotations

from typing import Any

import pytest

from taskforge import ConfigurationError, TaskForge
from taskforge.dashboard import create_app
from tests.asgi import asgi_get


def status_of(web: Any, host: str, origin: str | None = None) -> int:
    """The status one GET of a path no route serves gets, with this Host (and Origin)."""
    headers = [(b"host", host.encode())] + ([(b"origin", origin.encode())] if origin else [])
    return asgi_get(web, "/nothing-here", headers)[0]


def test_create_app_answers_to_loopback_and_the_names_it_is_given() -> None:
    app = TaskForge("lib", broker="memory://")
    plain = create_app(app)
    assert status_of(plain, "127.0.0.1:8080") == 404 and status_of(plain, "localhost") == 404
    assert status_of(plain, "testserver") == 400 and status_of(plain, "ops.example.com") == 400
    assert status_of(plain, "localhost:8080", origin="null") == 403
    named = create_app(app, allow_hosts=["ops.example.com", "testserver"], bound_to="10.0.0.5")
    for host in ("ops.example.com:443", "testserver", "10.0.0.5:8080", "[::1]:8080"):
        assert status_of(named, host) == 404, host
    assert status_of(named, "evil.example") == 400
    with pytest.raises(ConfigurationError, match="--allow-host 'https://ops.example.com'"):
        create_app(app, allow_hosts=["https://ops.example.com"])
