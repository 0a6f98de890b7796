"""arq: ``await pool.enqueue_job()`` (asyncio); two ``arq`` processes (it has no process option)."""

from arq.connections import RedisSettings, create_pool

from peers import _common

SPEC = {
    "name": "arq",
    "requirements": ["arq"],
    "distributions": ["arq", "redis", "hiredis"],
    "worker": ["{bin}/arq", "peers.arq.WorkerSettings", "--custom-log-dict", "peers.arq.LOG_CONFIG"],
    "copies": "{procs}",
    "enqueue_api": "await pool.enqueue_job('noop')",
    "bulk": None,
    "no_bulk": "none: no bulk enqueue API",
    "optional": True,
}

REDIS = RedisSettings.from_dsn(_common.queue_url())
# arq logs every job at INFO; keep its warnings.
LOG_CONFIG = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"stderr": {"class": "logging.StreamHandler", "level": "WARNING"}},
    "loggers": {"arq": {"handlers": ["stderr"], "level": "WARNING"}},
}


async def noop(ctx) -> None:
    await _common.arecord_done()


async def stamp(ctx) -> None:
    await _common.arecord_start()


class WorkerSettings:
    functions = [noop, stamp]
    redis_settings = REDIS


pool = None


async def open_producer() -> None:
    global pool
    pool = await create_pool(REDIS)


async def close_producer() -> None:
    await pool.aclose() if hasattr(pool, "aclose") else await pool.close()


async def send_noop() -> None:
    await pool.enqueue_job("noop")


async def send_stamp() -> None:
    await pool.enqueue_job("stamp")
