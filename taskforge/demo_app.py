"""The app ``taskforge demo`` runs: a few everyday tasks, one flaky, one doomed.

A worker imports it as ``taskforge.demo_app:app``; importing it touches
nothing (the broker URL comes from ``TASKFORGE_BROKER_URL`` and the
connection opens on first use).
"""

from __future__ import annotations

import time

from .app import TaskForge

app = TaskForge("demo")


@app.task(priority="critical", max_attempts=5)
def charge_card(order_id: int, cents: int) -> str:
    time.sleep(0.002)
    return f"order {order_id}: charged {cents / 100:.2f} EUR"


@app.task(priority="high")
def send_email(to: str, subject: str = "hello") -> str:
    time.sleep(0.002)
    return f"sent {subject!r} to {to}"


@app.task
def resize_image(image_id: int, width: int = 256) -> dict[str, int]:
    time.sleep(0.002)
    return {"image": image_id, "width": width, "height": width * 3 // 4}


@app.task(priority="low")
def build_report(day: int) -> str:
    time.sleep(0.002)
    return f"report for day {day}"


@app.task(max_attempts=3, backoff=0.2)
def call_flaky_api(request_id: int) -> str:
    """Fails on its first attempt, like an upstream that times out now and then."""
    attempt = app.broker.client.incr(f"demo:attempts:{request_id}")
    if attempt == 1:
        raise ConnectionError(f"upstream timed out on request {request_id}")
    return f"request {request_id} answered on attempt {attempt}"


@app.task(max_attempts=3, backoff=0.2)
def sync_inventory(warehouse: str) -> None:
    """Fails on every attempt, so it ends in the dead-letter set."""
    raise RuntimeError(f"warehouse {warehouse!r} rejected the sync: invalid API key")


@app.task(priority="high")
def send_reminder(user: str) -> str:
    return f"reminded {user}"
