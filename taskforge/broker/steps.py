"""Durable steps and streams: what a job's finished steps returned, kept with the job, and what it streamed.

A step's result is a field of the job's hash, ``step:<name>`` (msgpack),
written by ``store_step.lua`` only while the run that computed it still
holds the job (the claim token), so it lives, expires and is purged with the
record. A later run of the same job reads it back instead of running the
step again (``context.CurrentJob.step``). A stream item goes the same way
(``stream.lua``): fenced, into a Redis Stream beside the record, which the
record counts and whose expiry finishing the job sets with its own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

import redis

from ..errors import CorruptJob
from . import calls
from .keys import QueueKeys
from .record import STEP_FIELD

if TYPE_CHECKING:
    from .link import Link


class Steps:
    """Store and read back a job's step results, on one app's Redis (``Broker.steps``)."""

    def __init__(self, link: Link) -> None:
        self.client = link.client
        self.scripts = link.scripts
        self.guard = link.guard

    def stored(self, queue: str, job_id: str, name: str) -> bytes | None:
        """The msgpack a finished step ``name`` of the job returned, or None when it has not finished."""
        with self.guard(queue):
            try:
                raw = self.client.hget(QueueKeys(queue).job(job_id), STEP_FIELD.decode() + name)
            except redis.ResponseError:  # the key is no hash (damaged): as if the step never ran
                return None
        return cast("bytes | None", raw)

    def slept(self, queue: str, job_id: str, index: int) -> bool:
        """Whether the job's run already reached its sleep number ``index`` (1 for the first) once."""
        with self.guard(queue):
            try:
                return bool(self.client.hexists(QueueKeys(queue).job(job_id), f"slept:{index}"))
            except redis.ResponseError:  # the key is no hash (damaged): as if it never slept
                return False

    def sleep(self, queue: str, job_id: str, token: str, index: int, due_ms: int, delay_ms: int) -> int:
        """End the run and schedule the job (``due_ms``, or ``delay_ms`` from now when 0) without using an
        attempt; the due time in ms, or -1 when the run no longer holds the job (fenced)."""
        call = calls.sleep_job(
            QueueKeys(queue), job_id=job_id, token=token, index=index, due_ms=due_ms, delay_ms=delay_ms
        )
        with self.guard(queue):
            return self.scripts.run(call)

    def store(self, queue: str, job_id: str, token: str, name: str, result: bytes) -> bool:
        """Keep a finished step's result (msgpack); False when the run no longer holds the job (fenced)."""
        call = calls.store_step(QueueKeys(queue), job_id=job_id, token=token, name=name, result=result)
        with self.guard(queue):
            return self.scripts.run(call)

    def append(self, queue: str, job_id: str, token: str, item: bytes, index: int) -> bool:
        """Add the run's item number ``index`` (msgpack) to the job's stream, once however often the call
        is sent; False when the run no longer holds the job (fenced)."""
        call = calls.stream(QueueKeys(queue), job_id=job_id, token=token, item=item, index=index)
        with self.guard(queue):
            try:
                return self.scripts.run(call) is not None
            except redis.ResponseError as exc:
                if "CorruptJob" not in str(exc):
                    raise
                raise CorruptJob(str(exc).split("CorruptJob: ", 1)[-1]) from None
