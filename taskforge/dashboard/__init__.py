"""The web dashboard (``taskforge dashboard APP``; extra ``taskforge-redis[dashboard]``).

Starlette for routing, uvicorn to serve it, Jinja2 for the pages: small,
well-kept libraries, and an ASGI app whose handlers run in a thread pool, so
the same blocking Redis client as the rest of taskforge serves it. Every
asset (CSS, script) ships in the package: it works offline, with no CDN.

Modules: ``data`` (what is shown, built on ``taskforge.status``), ``pages``
(HTML and actions), ``api`` (the JSON documents), ``security`` (Basic auth
and CSRF), ``hosts`` (the allowed ``Host`` and ``Origin``: DNS rebinding),
``values`` (big values cut to a preview), ``server`` (routes and error pages).
"""

from __future__ import annotations

from .server import create_app

__all__ = ["create_app"]
