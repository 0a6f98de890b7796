"""Calls that break the task's signature: ``mypy --strict`` must reject each line marked ``# wrong``."""

from __future__ import annotations

from taskforge import TaskForge

app = TaskForge("typed", broker="memory://")


@app.task
def add(a: int, b: int) -> int:
    return a + b


@app.task(queue="mail")
def send(to: str, subject: str = "hello") -> str:
    return f"{subject} to {to}"


add.delay("one", 2)  # wrong
add.delay(1)  # wrong
add.delay(1, 2, 3)  # wrong
add.delay(1, c=2)  # wrong
send.delay(to=1)  # wrong
add.apply_in(5, "one", 2)  # wrong
add.with_options(priority="high").delay("1", 2)  # wrong
text: str = add.delay(1, 2).result()  # wrong
add.apply_async((1, 2), expires=10)  # wrong
celery_text: str = add.apply_async((1, 2)).get()  # wrong
celery_state = add.delay(1, 2).state  # wrong
add.retry()  # wrong
