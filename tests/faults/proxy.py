"""A fault-injecting TCP proxy between taskforge clients and a private Redis, on loopback.

One ``FaultProxy`` per client process (a worker, the producer), so a fault
can hit one of them and not the others. Every accepted connection gets its
own upstream connection and two forwarding threads; what they do with each
chunk is the proxy's current mode:

* pass: forward at once;
* delay: sleep 20-50 ms (seeded) before forwarding, each way;
* blackhole: hold every byte, both ways, with TCP still up (a partition the
  client only learns of through its own timeouts); on heal, what was held is
  delivered, late, as a real network delivers retransmitted segments;
* drop: a request chunk that carries one of the given words (a script's SHA)
  is forwarded, the server runs it, and its reply is swallowed and the
  client's connection reset: "the write landed but the caller never heard";
* reset: ``reset_all()`` closes every connection with an RST now.

Everything is bounded: sockets time out, threads are daemons, ``close()``
ends them all.
"""

from __future__ import annotations

import random
import socket
import struct
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

HOST = "127.0.0.1"
CHUNK = 65536


def _rst(sock: socket.socket) -> None:
    """Close with an RST (SO_LINGER 0), as a peer that vanished does.

    ``shutdown`` first: a bare ``close`` leaves the socket open while the
    other pump thread is blocked in ``recv`` on it, and the client would wait
    for its socket timeout instead of seeing the connection drop.
    """
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    try:
        sock.close()
    except OSError:
        pass


@dataclass
class Window:
    """When a fault was on, by this machine's wall clock (Redis's too: same host)."""

    kind: str
    start: float
    end: float = float("inf")


@dataclass
class Link:
    client: socket.socket
    server: socket.socket
    swallow: bool = False  # the next reply is dropped, then the link is reset
    closed: bool = False

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            _rst(self.client)
            _rst(self.server)


@dataclass
class Stats:
    connections: int = 0
    resets: int = 0
    dropped: Counter[str] = field(default_factory=Counter)  # dropped replies by script name


class FaultProxy:
    def __init__(self, upstream_port: int, seed: int, name: str = "proxy") -> None:
        self.upstream = (HOST, upstream_port)
        self.name = name
        self.rng = random.Random(seed)
        self.lock = threading.Lock()
        self.delay: tuple[float, float] | None = None
        self.blackhole = False
        self.drop_rate = 0.0
        self.drop_words: dict[bytes, str] = {}  # a word in a request chunk -> the name counted when dropped
        self.links: list[Link] = []
        self.stats = Stats()
        self.windows: list[Window] = []
        self.listener = socket.create_server((HOST, 0))
        self.listener.settimeout(0.2)
        self.port = self.listener.getsockname()[1]
        self.running = True
        self.thread = threading.Thread(target=self._accept, name=f"{name}-accept", daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"redis://{HOST}:{self.port}/0"

    # -- modes ---------------------------------------------------------------

    def set_delay(self, low: float, high: float) -> None:
        self.delay = (low, high)
        self.windows.append(Window("delay", time.time()))

    def partition(self) -> None:
        self.blackhole = True
        self.windows.append(Window("blackhole", time.time()))

    def heal(self) -> None:
        self.blackhole = False
        self.delay = None
        self.drop_rate = 0.0
        now = time.time()
        for window in self.windows:
            if window.end == float("inf"):
                window.end = now

    def drop_replies(self, rate: float, words: dict[bytes, str]) -> None:
        self.drop_rate = rate
        self.drop_words = words
        self.windows.append(Window("drop", time.time()))

    def reset_all(self) -> int:
        with self.lock:
            links, self.links = self.links, []
        for link in links:
            link.close()
        self.stats.resets += len(links)
        now = time.time()
        self.windows.append(Window("reset", now, now))
        return len(links)

    def faulted(self, start: float, end: float) -> str | None:
        """The kind of a fault window overlapping [start, end], if any."""
        for window in self.windows:
            if window.kind != "delay" and window.start <= end and start <= window.end:
                return window.kind
        return None

    def close(self) -> None:
        self.running = False
        self.heal()
        self.reset_all()
        self.listener.close()
        self.thread.join(timeout=5)

    # -- forwarding ----------------------------------------------------------

    def _accept(self) -> None:
        while self.running:
            try:
                client, _ = self.listener.accept()
            except (TimeoutError, OSError):
                continue
            try:
                server = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                _rst(client)
                continue
            for sock in (client, server):
                sock.settimeout(None)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            link = Link(client, server)
            with self.lock:
                self.links.append(link)
                self.stats.connections += 1
            threading.Thread(target=self._pump, args=(link, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(link, False), daemon=True).start()

    def _hold(self, link: Link) -> None:
        """Wait out a partition (bounded by the proxy's life)."""
        while self.blackhole and self.running and not link.closed:
            time.sleep(0.01)

    def _pause(self) -> None:
        delay = self.delay
        if delay is not None:
            with self.lock:
                seconds = self.rng.uniform(*delay)
            time.sleep(seconds)

    def _dropped(self, data: bytes) -> str | None:
        if not self.drop_rate or b"EVALSHA" not in data[:64].upper():
            return None
        for word, name in self.drop_words.items():
            if word in data:
                with self.lock:
                    if self.rng.random() < self.drop_rate:
                        return name
                return None
        return None

    def _pump(self, link: Link, upstream: bool) -> None:
        src, dst = (link.client, link.server) if upstream else (link.server, link.client)
        try:
            while not link.closed:
                data = src.recv(CHUNK)
                if not data:
                    break
                self._hold(link)
                self._pause()
                if upstream:
                    name = self._dropped(data)
                    if name is not None:
                        link.swallow = True
                        self.stats.dropped[name] += 1
                elif link.swallow:
                    break  # the reply arrived: swallow it and reset the client
                dst.sendall(data)
        except OSError:
            pass
        link.close()
        with self.lock:
            if link in self.links:
                self.links.remove(link)
