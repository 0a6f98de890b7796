"""The producer's queue operations over ``redis.asyncio``: what the ``a``-methods await.

The same Lua scripts, sent by SHA from the same ``ScriptCall``s (``calls.py``)
and decoded by the same code, so a job stored here is byte for byte the one
``Jobs.enqueue`` stores. Only the sending differs: every command is
awaited, waits are blocking pops in slices (``wait_for_list``), and the
retries through a failover sleep with ``asyncio.sleep``. Errors become the
sync side's errors: ``broker_errors`` and ``find_damage`` are reused as they
are (the damage check reads its keys first, then judges them offline).

One ``AsyncBroker`` per app and live event loop (``TaskForge.async_broker``,
``aio_loops.py``): a redis.asyncio connection belongs to the loop that opened
it, and is closed when that loop ends.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any, TypeVar, cast

import redis
from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster
from redis.exceptions import NoScriptError

from . import job_plans, keys
from .aio_connection import (
    AsyncClient,
    abandon_client,
    aconnect,
    client_connections,
    drop_connection,
)
from .aio_roles import AsyncFlowRole, AsyncJobsRole, AsyncLedgerRole
from .calls import ScriptCall
from .connection import SCRIPT_LOADS, broker_errors
from .damage import expected_types, find_damage
from .drivers import adrive
from .durability import FAILOVER_RETRY_S, QueueNames
from .flow import AsyncFlow
from .plan import Plan, Settings
from .record import NewJob
from .replies import AbortOutcome, CancelOutcome
from .scaled import is_scaled
from .scripts import REPLICA_WAIT_MS, SCRIPT_NAMES, denials, script_source
from .slots import queue_calls, slot_moved
from .stream_reads import StreamRead
from .workflows import AsyncWorkflowStore

T = TypeVar("T")
log = logging.getLogger("taskforge.broker")


async def _then_wait(node: Any, script: Any, keys_: list[str], argv: list[Any]) -> tuple[Any, int]:
    """``slots.write_then_wait``: the script then ``WAIT 1`` in one pipeline; on NOSCRIPT, load and send again.

    Sending again is safe: NOSCRIPT means the script ran nowhere in the pipeline.
    """

    async def send() -> tuple[Any, int]:
        pipe = node.pipeline(transaction=False)
        queue_calls(pipe, script, [(keys_, argv)], REPLICA_WAIT_MS)
        raw, acked = await pipe.execute()
        return raw, int(acked)

    return await _loading(send, lambda: node.script_load(script.script))


async def _loading(send: Callable[[], Awaitable[T]], load: Callable[[], Awaitable[object]]) -> T:
    """``connection.with_scripts_loaded`` for a coroutine: ``send()``, and on NOSCRIPT load and send
    again, up to ``SCRIPT_LOADS`` loads (the server lost its scripts in between: it restarted)."""
    for _ in range(SCRIPT_LOADS):
        try:
            return await send()
        except NoScriptError:
            await load()
    return await send()


class _Snapshot:
    """Key types and ``:seq`` values read beforehand, served as the client ``find_damage`` expects."""

    def __init__(self, kinds: dict[str, Any], values: dict[str, Any]) -> None:
        self.kinds = kinds
        self.values = values
        self.asked: list[str] = []

    def pipeline(self, transaction: bool = False) -> _Snapshot:
        self.asked = []
        return self

    def type(self, key: str) -> None:
        self.asked.append(key)

    def execute(self) -> list[Any]:
        return [self.kinds[key] for key in self.asked]

    def get(self, key: str) -> Any:
        return self.values.get(key)


class AsyncLink:
    """What the async roles share on one event loop: the client, its scripts, the settings, ``guard``."""

    def __init__(
        self, client: AsyncClient, url: str, retention_ms: int, dead_retention_ms: int, durability: str = "async"
    ) -> None:
        self.client: Any = client
        self.url = url
        self.retention_ms = retention_ms
        self.dead_retention_ms = dead_retention_ms
        self.replicated = durability == "replicated"
        self.memory = url.startswith("memory:")
        self.cluster = isinstance(client, AsyncRedisCluster)
        self.failover_retry_s = FAILOVER_RETRY_S if is_scaled(url) else 0.0
        self.settings = Settings(url, retention_ms, self.cluster, self.replicated, self.failover_retry_s, QueueNames())
        self._scripts = {name: client.register_script(script_source(name)) for name in SCRIPT_NAMES}
        self._masters: dict[str, Any] = {}  # cluster node name -> a plain client of it, for WAIT

    def _clients(self) -> list[Any]:
        """The clients whose connections are this loop's: any node clients, a Sentinel's own, the main one."""
        sentinel = getattr(getattr(self.client, "connection_pool", None), "sentinel_manager", None)
        return [*self._masters.values(), *getattr(sentinel, "sentinels", ()), self.client]

    async def close(self) -> None:
        """Close this loop's connections: the client's pool, any node clients, and a Sentinel's own clients."""
        clients = self._clients()
        self._masters.clear()
        for client in clients:
            if self.memory:  # fakeredis's disconnect keeps its socket on the shared server: take it off
                for connection in list(client_connections(client)):
                    drop_connection(connection)
            await client.aclose()

    def abandon(self) -> None:
        """Close the connections of a loop that is closed, without awaiting (nothing can run on that loop now)."""
        clients = self._clients()
        self._masters.clear()
        for client in clients:
            abandon_client(client)

    # -- sending scripts ---------------------------------------------------

    async def run(self, call: ScriptCall[T]) -> T:
        """Run one call by SHA (loading the script on NOSCRIPT) and decode its reply."""
        script = self._scripts[call.name]
        with denials(call.name):
            raw = await _loading(
                lambda: self.client.evalsha(script.sha, len(call.keys), *call.keys, *call.argv),
                lambda: self.client.script_load(script.script),
            )
        return call.decode(raw)

    async def write(self, call: ScriptCall[T]) -> tuple[T, int | None]:
        """``Scripts.write``: with durability="replicated", the call and ``WAIT`` on one connection."""
        if not self.replicated:
            return await self.run(call), None
        node = await self._master(call.keys[0])
        try:
            with denials(call.name):
                raw, acked = await _then_wait(node, self._scripts[call.name], call.keys, call.argv)
        except (redis.ConnectionError, redis.TimeoutError, redis.ResponseError) as exc:
            moved = slot_moved(exc)
            if not self.cluster or (isinstance(exc, redis.ResponseError) and not moved):
                raise
            await self._relearn()  # ``slots.on_master``: a replica may have taken over; callers retry
            raise redis.ConnectionError(f"the master of {call.keys[0]!r} is unreachable or moved ({exc})") from None
        return call.decode(raw), acked

    async def _master(self, key: str) -> Any:
        """The client whose connection reaches the master of ``key`` (in a cluster, a plain client of that node)."""
        if not self.cluster:
            return self.client
        await self.client.initialize()
        node = self.client.get_node_from_key(key)
        known = self._masters.get(node.name)
        if known is None:
            import redis.asyncio as aioredis

            wanted = ("username", "password", "socket_timeout", "socket_connect_timeout", "socket_keepalive")
            given = self.client.get_connection_kwargs()
            options = {k: given[k] for k in wanted if k in given}
            known = self._masters[node.name] = aioredis.Redis(host=node.host, port=node.port, **options)
        return known

    async def _relearn(self) -> None:
        try:
            await self.client.nodes_manager.initialize()
        except (redis.RedisError, redis.exceptions.RedisClusterException):
            pass  # the next call fails and gets here again

    @asynccontextmanager
    async def guard(self, *queues: str) -> AsyncIterator[None]:
        """``Link.guard``: Redis errors as taskforge errors; damaged fixed keys as ``CorruptQueue``."""
        try:
            with broker_errors(self.url):
                yield
        except redis.ResponseError:
            with broker_errors(self.url):
                damage = await self._damage(queues)
            if damage is not None:
                raise damage from None
            raise

    async def _damage(self, queues: Sequence[str]) -> Any:
        wanted = [keys.QUEUES, *(key for queue in queues for key in expected_types(queue))]
        pipe = self.client.pipeline(transaction=False)
        for key in wanted:
            pipe.type(key)
        kinds = [k.decode() if isinstance(k, bytes) else str(k) for k in await pipe.execute()]
        types = dict(zip(wanted, kinds, strict=True))
        values = {key: await self.client.get(key) for key, kind in types.items() if kind == "string"}
        return find_damage(cast(Any, _Snapshot(types, values)), queues)


class AsyncJobs:
    """``Jobs``, awaited: the producer's role on one event loop (``AsyncBroker.jobs``)."""

    def __init__(self, link: AsyncLink) -> None:
        self.link = link
        self.client = link.client
        self.url = link.url
        self.memory = link.memory
        self.cluster = link.cluster
        self.retention_ms = link.retention_ms
        self.settings = link.settings

    async def enqueue(self, queue: str, jobs: Sequence[NewJob], max_size: int = 0, resend: bool = False) -> list[str]:
        """``Jobs.enqueue``, awaited: the same tries (a plain first one sent once, then checked re-sends)."""
        return await adrive(self.link, job_plans.enqueue(self.settings, queue, jobs, max_size, resend))

    # -- following a job: the plans of ``job_plans.py``, driven on this loop ------

    async def read(self, queue: str, job_id: str) -> dict[bytes, bytes] | None:
        """The raw job hash, or None when there is no such job."""
        return await adrive(self.link, job_plans.read(queue, job_id))

    async def queues(self) -> list[str]:
        return await adrive(self.link, job_plans.queues())

    async def cancel(self, queue: str, job_id: str) -> CancelOutcome:
        return await adrive(self.link, job_plans.cancel(queue, job_id, self.retention_ms))

    async def abort(self, queue: str, job_id: str) -> AbortOutcome:
        return await adrive(self.link, job_plans.abort(queue, job_id, self.retention_ms))

    async def await_state(self, queue: str, job_id: str) -> str | None:
        return await adrive(self.link, job_plans.await_state(queue, job_id))

    async def wait_done(self, queue: str, job_id: str, timeout: float) -> bool:
        """Wait until the job's done list exists; non-destructive, so many may wait."""
        return await adrive(self.link, job_plans.wait_done(queue, job_id, timeout))

    async def read_stream(self, queue: str, job_id: str, after: str, block: float) -> StreamRead:
        """``Jobs.read_stream``, awaited: the loop runs other coroutines while the XREAD blocks."""
        return await adrive(self.link, job_plans.read_stream(queue, job_id, after, block))


class AsyncBroker:
    """One app's producer view of Redis on one event loop: its roles over one ``AsyncLink``."""

    def __init__(
        self, client: AsyncClient, url: str, retention_ms: int, dead_retention_ms: int, durability: str = "async"
    ) -> None:
        self.link = link = AsyncLink(client, url, retention_ms, dead_retention_ms, durability)
        self.client: Any = client
        self.url = url
        # Typed as their protocols: mypy checks each role against its protocol here.
        self.jobs: AsyncJobsRole = AsyncJobs(link)
        self.ledger: AsyncLedgerRole = AsyncWorkflowStore(link)
        self.flow: AsyncFlowRole = AsyncFlow(link)
        self.settings = link.settings

    async def drive(self, plan: Plan[T]) -> T:
        """Run a plan that spans roles (``workflows/delivery.py``'s) on this loop (``drivers.adrive``)."""
        return await adrive(self.link, plan)

    @classmethod
    def open(cls, url: str, memory: Any, retention_ms: int, dead_retention_ms: int, durability: str) -> AsyncBroker:
        """A broker for ``url`` (``memory``: the sync fakeredis client whose server memory:// shares)."""
        return cls(aconnect(url, memory), url, retention_ms, dead_retention_ms, durability)

    async def close(self) -> None:
        """Close this loop's connections (``AsyncLink.close``)."""
        await self.link.close()

    def abandon(self) -> None:
        """Drop the connections of a loop that is closed (``AsyncLink.abandon``)."""
        self.link.abandon()
