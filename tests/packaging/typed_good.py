"""Calls a user writes against taskforge's annotations: ``mypy --strict`` must accept every one."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from taskforge import JobHandle, Priority, TaskForge

app = TaskForge("typed", broker="memory://")


@app.task
def add(a: int, b: int) -> int:
    return a + b


@app.task(queue="mail", priority="high", max_attempts=5)
def send(to: str, subject: str = "hello") -> str:
    return f"{subject} to {to}"


def produce() -> int:
    handle: JobHandle[int] = add.delay(1, 2)
    later = add.apply_in(timedelta(seconds=5), 1, b=2)
    add.apply_at(datetime(2027, 1, 1, tzinfo=timezone.utc), a=1, b=2)
    urgent = send.with_options(priority=Priority.CRITICAL).delay("a@b.c", subject="hi")
    inline: int = add(1, 2)
    text: str = urgent.result(timeout=1)
    return handle.result(timeout=1) + later.result() + inline + len(text)
