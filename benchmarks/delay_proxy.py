"""A TCP proxy that delays every byte by a fixed time each way: Redis "in another zone".

Each chunk read from one side is written to the other ``--delay-ms`` after it
arrived, in order, so a round trip through the proxy costs twice the delay
plus what it cost without; throughput is not limited (a chunk does not wait
for the one before it to be written, only for its own time).

    python benchmarks/delay_proxy.py --listen 6390 --to 127.0.0.1:6379 --delay-ms 2
"""

from __future__ import annotations

import argparse
import asyncio
import time


async def pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay: float) -> None:
    """Copy ``reader`` to ``writer``, each chunk ``delay`` seconds after it was read."""
    queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

    async def later() -> None:
        while True:
            due, chunk = await queue.get()
            if not chunk:
                break
            wait = due - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            writer.write(chunk)
            await writer.drain()
        writer.close()

    sender = asyncio.create_task(later())
    try:
        while chunk := await reader.read(65536):
            queue.put_nowait((time.monotonic() + delay, chunk))
    except ConnectionError:
        pass
    queue.put_nowait((0.0, b""))
    await sender


async def serve(listen: int, host: str, port: int, delay: float) -> None:
    async def handle(client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        try:
            server_reader, server_writer = await asyncio.open_connection(host, port)
        except OSError:
            client_writer.close()
            return
        await asyncio.gather(
            pump(client_reader, server_writer, delay), pump(server_reader, client_writer, delay), return_exceptions=True
        )

    server = await asyncio.start_server(handle, "127.0.0.1", listen)
    async with server:
        await server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--listen", type=int, required=True, help="port to listen on (127.0.0.1)")
    parser.add_argument("--to", required=True, help="HOST:PORT of the Redis to forward to")
    parser.add_argument("--delay-ms", type=float, default=2.0, help="added each way (default 2)")
    opts = parser.parse_args()
    host, _, port = opts.to.rpartition(":")
    asyncio.run(serve(opts.listen, host, int(port), opts.delay_ms / 1000))


if __name__ == "__main__":
    main()
