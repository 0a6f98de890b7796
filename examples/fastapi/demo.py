"""Run the FastAPI app on a free port and call it like a client would.

With a worker running (``taskforge worker tasks:app -c 1``), from this
directory: ``python demo.py``. It serves ``web:api`` with uvicorn in a
thread, then: enqueues 50 thumbnails and polls one of them; makes one in
the request itself; and shows that the server stays responsive while 20
requests each await a result.
"""

import json
import socket
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import uvicorn
from web import api


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def call(base: str, method: str, path: str) -> dict:
    request = urllib.request.Request(base + path, method=method)
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def main() -> None:
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(api, host="127.0.0.1", port=port, log_level="warning"))
    threading.Thread(target=server.run, daemon=True).start()
    while not server.started:
        time.sleep(0.05)
    base = f"http://127.0.0.1:{port}"
    try:
        ids = [call(base, "POST", f"/thumbnails/photo-{i}.jpg?size=64")["job"] for i in range(50)]
        print(f"enqueued {len(ids)} thumbnails, the first is job {ids[0]}")
        print("state of the first, at once:", call(base, "GET", f"/jobs/{ids[0]}")["state"])
        done = call(base, "GET", f"/jobs/{ids[-1]}?wait=10")
        print(f"the last one, awaited: {done['state']}, {done['result']['thumbnail']}")

        made = call(base, "POST", "/thumbnails/cover.png/now?size=256")
        print(f"made within the request: {made['thumbnail']} ({made['bytes']} bytes)")

        # 20 requests each await a result; meanwhile a status request still answers
        # at once, because awaiting a result never blocks the server's loop.
        with ThreadPoolExecutor(20) as pool:
            waiting = [pool.submit(call, base, "POST", f"/thumbnails/batch-{i}.png/now") for i in range(20)]
            started = time.perf_counter()
            call(base, "GET", f"/jobs/{ids[0]}")
            answered = time.perf_counter() - started
            results = [f.result() for f in waiting]
        print(
            f"{len(results)} requests awaited their results; a status request meanwhile took {answered * 1000:.0f} ms"
        )
    finally:
        server.should_exit = True


if __name__ == "__main__":
    main()
