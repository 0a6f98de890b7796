"""The embedded development broker: a Redis-protocol server in a thread of this process.

It is fakeredis's TCP server (with Lua through lupa), so ``taskforge worker``
and every producer can talk to it exactly as to Redis, with no Redis
installed. It is for development only: everything lives in this process's
memory and is gone when it stops, one Python process serves every client,
and it is several times slower than Redis.
"""

from __future__ import annotations

import socket
import threading
from typing import Any

from .broker.fakelua import compile_once
from .errors import BrokerStartError

# Handler threads poll their socket this often; stop() waits at most this long for each.
STOP_JOIN = 2.0


def _server_class() -> Any:
    from fakeredis import TcpFakeServer

    class TrackingServer(TcpFakeServer):
        """Remembers its client sockets, so stopping never waits on a client that blocks forever."""

        daemon_threads = True
        block_on_close = False

        def __init__(self, address: tuple[str, int]) -> None:
            self.client_sockets: set[socket.socket] = set()
            self.lock = threading.Lock()
            super().__init__(address, server_type="redis")
            self.daemon_threads = True  # the base class sets False in its __init__

        def get_request(self) -> tuple[socket.socket, Any]:
            conn, address = super().get_request()
            # fakeredis writes each reply of a pipeline separately; with Nagle on, every reply
            # after the first waits for the client's delayed ACK (~40 ms on Linux).
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self.lock:
                self.client_sockets.add(conn)
            return conn, address

        def shutdown_request(self, request: Any) -> None:
            with self.lock:
                self.client_sockets.discard(request)
            super().shutdown_request(request)

        def drop_clients(self) -> None:
            with self.lock:
                clients = list(self.client_sockets)
            for conn in clients:
                try:
                    conn.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    return TrackingServer


class DevBroker:
    """A fakeredis TCP server on ``host:port``; ``port=0`` picks a free port.

    Use as a context manager, or call ``start()`` and ``stop()``.
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 6379) -> None:
        self.host = host
        self.port = port
        self._server: Any = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The broker URL clients should use (database 0)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"redis://{host}:{self.port}/0"

    def start(self) -> str:
        """Listen and serve in a background thread; returns the URL. Raises BrokerStartError."""
        server_class = _server_class()
        if ":" in self.host:
            server_class.address_family = socket.AF_INET6
        try:
            self._server = server_class((self.host, self.port))
        except OSError as exc:
            raise BrokerStartError(
                f"cannot listen on {self.host}:{self.port}: {exc.strerror or exc}; "
                "is another broker or Redis running there? Pick another --port"
            ) from None
        self.port = self._server.server_address[1]
        compile_once(self._server.fake_server)
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.1},
            name="taskforge-devbroker",
            daemon=True,
        )
        self._thread.start()
        return self.url

    def stop(self) -> None:
        """Stop accepting, disconnect every client, release the port. Idempotent."""
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()  # sets fakeredis's stop flag, then waits for serve_forever to return
        server.drop_clients()
        server.server_close()
        if self._thread is not None:
            self._thread.join(STOP_JOIN)
            self._thread = None

    def __enter__(self) -> DevBroker:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
