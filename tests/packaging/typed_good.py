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


def celery_style() -> int:
    """The Celery landing pad keeps the task's types: apply_async and get return what delay and result do."""
    handle: JobHandle[int] = add.apply_async(args=(1, 2), countdown=5, queue="q", priority="high", task_id="x")
    later = add.apply_async((1,), {"b": 2}, eta=datetime(2027, 1, 1, tzinfo=timezone.utc))
    return handle.get(timeout=1) + later.get()


async def async_celery_style() -> int:
    handle = await add.aapply_async((1, 2))
    value: int = await handle.aget(timeout=1)
    return value
