"""Django tasks the contract tests in ``test_django.py`` enqueue; a worker imports them by path, as any Django task.

Only a Python with Django 6 imports this module (it defines tasks at import,
which needs the settings), so it is not named ``test_*``.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from asgiref.sync import sync_to_async
from django.db import connection
from django.tasks import task


class OutOfStock(Exception):
    """An exception of the project's own, named by its import path in ``TaskError``."""


@task
def echo(value: Any) -> Any:
    return value


@task
def now() -> datetime:
    """Returns what JSON cannot hold: Django fails the task."""
    return datetime.now(timezone.utc)


@task
def out_of_stock(item: str) -> None:
    raise OutOfStock(item)


@task
def drop_connection() -> str:
    """Use the database, then lose the connection under Django's feet, as a server restart or idle timeout does."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    connection.connection.close()
    return "dropped"


@task
def query_database() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        return int(cursor.fetchone()[0])


def _drop() -> str:
    return drop_connection.func()


def _query() -> int:
    return query_database.func()


@task
async def adrop_connection() -> str:
    """``drop_connection`` from a coroutine: the ORM runs in ``sync_to_async``'s thread, and so do its connections."""
    return await sync_to_async(_drop)()


@task
async def aquery_database() -> int:
    return await sync_to_async(_query)()


@task
def double_dictionary(key: Any) -> dict[Any, Any]:
    """Django's documented example: a tuple argument arrives a list, which cannot be a dict key."""
    return {key: key * 2}


@task(takes_context=True)
def fails_first(context: Any, always: bool) -> int:
    """Raises in its first run (in every run if ``always``): enqueued with two attempts, it is retried once."""
    if always or context.attempt == 1:
        raise OutOfStock(f"attempt {context.attempt}")
    return int(context.attempt)
