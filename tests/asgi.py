"""One GET through an ASGI app in this process: no server, no HTTP client, no port."""

from __future__ import annotations

import asyncio
from typing import Any


def asgi_get(web: Any, path: str, headers: list[tuple[bytes, bytes]] | None = None) -> tuple[int, bytes]:
    """The status and body ``web`` answers to a GET of ``path``; by default as a browser on the same host."""
    raw_path, _, query_string = path.partition("?")
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": raw_path,
        "raw_path": raw_path.encode(),
        "query_string": query_string.encode(),
        "root_path": "",
        "headers": headers if headers is not None else [(b"host", b"127.0.0.1:8000")],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
    }
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(web(scope, receive, send))
    code = next(m["status"] for m in sent if m["type"] == "http.response.start")
    return int(code), b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
