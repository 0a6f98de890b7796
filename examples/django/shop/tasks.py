"""A plain Django task: nothing here knows about taskforge."""

import asyncio

from django.tasks import TaskContext, task


@task(priority=10)
def thumbnail(name: str, size: int) -> dict[str, object]:
    return {"name": name, "thumbnail": f"thumbs/{size}/{name}", "bytes": size * size // 8}


@task
async def fetch_title(url: str) -> str:
    """A coroutine task: it runs on the worker's event loop, beside other async jobs."""
    await asyncio.sleep(0.01)
    return f"title of {url}"


@task(queue_name="emails")
def send_welcome_email(address: str) -> str:
    """A task on a queue of its own: ``manage.py taskforge_worker`` serves every queue of ``QUEUES``."""
    return f"welcome mail sent to {address}"


@task(takes_context=True)
def which_attempt(context: TaskContext, label: str) -> str:
    """A task that asks Django's context which run this is."""
    return f"{label}: attempt {context.attempt} of result {context.task_result.id}"
