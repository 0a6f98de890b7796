"""The two drivers of a plan (``plan.py``): ``drive`` on redis-py, ``adrive`` on redis.asyncio.

These are the only two places a plan's requests meet a client, and the only
place its Redis errors are translated: each request runs inside its guard
(``Link.guard`` or ``AsyncLink.guard`` for the queues it names, or plain
``broker_errors``), and what the guard raised is thrown into the plan at the
``yield`` that asked, where the plan may catch it (a failover retry) or let
it pass to the caller. The two are written side by side on purpose, each
line of one matching a line of the other; ``tests/test_twins.py`` lets
only this pair be twins.
"""

from __future__ import annotations

import asyncio
import time
from contextlib import AbstractAsyncContextManager, AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any, TypeVar

import redis

from . import aio_connection, compat, connection
from .connection import broker_errors
from .plan import Command, Guard, Pipeline, Plan, Request, Script, Scripts, Sleep

if TYPE_CHECKING:
    from .aio import AsyncLink
    from .link import Link

T = TypeVar("T")


def drive(link: Link, plan: Plan[T]) -> T:
    """Run ``plan`` to its end on the sync client; its return value."""
    reply: Any = None
    error: Exception | None = None
    while True:
        try:
            request = plan.send(reply) if error is None else plan.throw(error)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        reply, error = None, None
        try:
            reply = _run(link, request)
        except Exception as exc:  # translated by the guard; the plan decides
            error = exc


def _guard(link: Link, guard: Guard) -> AbstractContextManager[None]:
    return broker_errors(link.url) if guard is None else link.guard(*guard)


def _run(link: Link, request: Request) -> Any:
    if isinstance(request, Sleep):
        time.sleep(request.seconds)
        return None
    with _guard(link, request.guard):
        if isinstance(request, Script):
            with connection.sent_once() if request.once else nullcontext():
                return link.scripts.write(request.call) if request.wait else link.scripts.run(request.call)
        if isinstance(request, Command):
            try:
                with connection.sent_once() if request.once else nullcontext():
                    return request.send(link.client)
            except redis.ResponseError as exc:
                if request.on_error is None:
                    raise
                return request.on_error(exc)
        if isinstance(request, Scripts):
            return link.scripts.run_each(request.calls)
        if isinstance(request, Pipeline):
            pipe = link.client.pipeline(transaction=False)
            request.fill(pipe)
            return pipe.execute(raise_on_error=request.raise_on_error)
        return compat.wait_for_list(link.client, request.key, request.timeout)


async def adrive(link: AsyncLink, plan: Plan[T]) -> T:
    """Run ``plan`` to its end on this loop's async client; its return value."""
    reply: Any = None
    error: Exception | None = None
    while True:
        try:
            request = plan.send(reply) if error is None else plan.throw(error)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        reply, error = None, None
        try:
            reply = await _arun(link, request)
        except Exception as exc:  # translated by the guard; the plan decides
            error = exc


def _aguard(link: AsyncLink, guard: Guard) -> AbstractAsyncContextManager[None]:
    return _Sync(broker_errors(link.url)) if guard is None else link.guard(*guard)


async def _arun(link: AsyncLink, request: Request) -> Any:
    if isinstance(request, Sleep):
        await asyncio.sleep(request.seconds)
        return None
    async with _aguard(link, request.guard):
        if isinstance(request, Script):
            with aio_connection.sent_once() if request.once else nullcontext():
                return await (link.write(request.call) if request.wait else link.run(request.call))
        if isinstance(request, Command):
            try:
                with aio_connection.sent_once() if request.once else nullcontext():
                    return await request.send(link.client)
            except redis.ResponseError as exc:
                if request.on_error is None:
                    raise
                return request.on_error(exc)
        if isinstance(request, Scripts):
            return [await link.run(call) for call in request.calls]
        if isinstance(request, Pipeline):
            pipe = link.client.pipeline(transaction=False)
            request.fill(pipe)
            return await pipe.execute(raise_on_error=request.raise_on_error)
        return await aio_connection.wait_for_list(link.client, request.key, request.timeout, link.memory)


class _Sync(AbstractAsyncContextManager[None]):
    """A sync context manager entered by ``async with`` (``broker_errors`` has no awaits to make)."""

    def __init__(self, inner: AbstractContextManager[None]) -> None:
        self.inner = inner

    async def __aenter__(self) -> None:
        self.inner.__enter__()

    async def __aexit__(self, *exc: Any) -> bool | None:
        return self.inner.__exit__(*exc)
