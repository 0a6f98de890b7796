"""Producers that keep sending through a failover, sync and async, and what each send met."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from taskforge.broker.keys import QueueKeys

from .load import QUEUES, producer
from .servers import client, wait_until

PAUSE = 0.01  # between two sends of one producer
AFTER = 20  # sends each producer makes after the failover
# A send once the new master serves takes milliseconds; an enqueue gives up after 30 s of retries.
SEND_BOUND_S = 10.0


@dataclass
class Send:
    started: float
    ended: float
    job_id: str | None = None
    error: BaseException | None = None


@dataclass
class Sender:
    """One application's ``.delay()`` (or ``.adelay()``) of ``scaled.work``, called again and again."""

    name: str
    work: Any
    sends: list[Send] = field(default_factory=list)

    def send_once(self, i: int) -> bool:
        started = time.monotonic()
        try:
            handle = self.work.delay(i)
        except BaseException as exc:  # the test reports it
            self.sends.append(Send(started, time.monotonic(), error=exc))
            return False
        self.sends.append(Send(started, time.monotonic(), handle.id))
        return True

    async def asend_once(self, i: int) -> bool:
        started = time.monotonic()
        try:
            handle = await self.work.adelay(i)
        except BaseException as exc:  # the test reports it
            self.sends.append(Send(started, time.monotonic(), error=exc))
            return False
        self.sends.append(Send(started, time.monotonic(), handle.id))
        return True

    def after(self, moment: float) -> list[Send]:
        """The sends that started after ``moment``."""
        return [s for s in self.sends if s.started > moment]

    def errors(self) -> list[BaseException]:
        return [s.error for s in self.sends if s.error is not None]


class Senders:
    """Four producers created before the failover: sync and async, each plain and ``durability="replicated"``.

    The sync ones send from a thread each; the async ones share one event
    loop that runs the whole time, as in a long-running async application.
    Each stops at its first error.
    """

    def __init__(self, url: str) -> None:
        self.stop = threading.Event()
        self.sync = [Sender(f"sync {d}", producer(url, durability=d)[1]) for d in ("async", "replicated")]
        self.aio = [Sender(f"async {d}", producer(url, durability=d)[1]) for d in ("async", "replicated")]
        self.threads = [threading.Thread(target=self._run, args=(s,), daemon=True) for s in self.sync]
        self.threads.append(threading.Thread(target=asyncio.run, args=(self._arun(),), daemon=True))

    @property
    def all(self) -> list[Sender]:
        return [*self.sync, *self.aio]

    @property
    def plain(self) -> list[Sender]:
        """The producers with ``durability="async"``: they need no replica to go on."""
        return [self.sync[0], self.aio[0]]

    def wait_for(self, senders: list[Sender], moment: float) -> None:
        """Until each of ``senders`` made ``AFTER`` sends since ``moment``, or failed."""
        wait_until(
            lambda: all(len(s.after(moment)) >= AFTER or s.errors() for s in senders),
            60,
            f"{AFTER} sends of each producer",
        )

    def start(self) -> None:
        for thread in self.threads:
            thread.start()

    def _run(self, sender: Sender) -> None:
        i = 0
        while not self.stop.is_set() and sender.send_once(i):
            i += 1
            time.sleep(PAUSE)

    async def _arun(self) -> None:
        async def run(sender: Sender) -> None:
            i = 0
            while not self.stop.is_set() and await sender.asend_once(i):
                i += 1
                await asyncio.sleep(PAUSE)

        await asyncio.gather(*(run(s) for s in self.aio))

    def finish(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout=60)
        assert not any(t.is_alive() for t in self.threads), "a producer did not stop within 60 s"

    def check_all(self, moments: dict[str, float], master: int, others: list[int]) -> None:
        """``check`` of every sender (by name: since when), all reported together: one failing alone tells apart
        a producer's fault from a node's."""
        failures = []
        for sender in self.all:
            try:
                self.check(sender, moments[sender.name], master, others)
            except AssertionError as exc:
                failures.append(str(exc))
        assert not failures, "\n".join(failures)

    @staticmethod
    def check(sender: Sender, moment: float, master: int, others: list[int]) -> None:
        """``sender`` never failed, and its sends since ``moment`` were quick and stored on ``master``.

        ``others``: every data node, asked where missing jobs went when some are.
        """
        assert not sender.errors(), f"{sender.name}: a send failed through the failover: {sender.errors()[0]!r}"
        after = sender.after(moment)
        assert len(after) >= AFTER, f"{sender.name}: {len(after)} sends after the failover"
        slowest = max(s.ended - s.started for s in after)
        assert slowest < SEND_BOUND_S, f"{sender.name}: a send after the failover took {slowest:.1f} s"
        redis = client(master)
        missing = [s.job_id for s in after if not redis.exists(QueueKeys(QUEUES[0]).job(str(s.job_id)))]
        assert not missing, (
            f"{sender.name}: {len(missing)} of the {len(after)} jobs sent after the failover are not on the new"
            f" master; {where(missing, others)}"
        )


def where(job_ids: list[str | None], ports: list[int]) -> str:
    """Where the missing jobs are, and each node's role: what a failure needs to be understood."""
    seen = []
    for port in ports:
        try:
            node = client(port)
            role = node.info("replication")["role"]
            found = sum(bool(node.exists(QueueKeys(QUEUES[0]).job(str(i)))) for i in job_ids)
        except Exception as exc:  # a node down is a finding too
            seen.append(f"{port}: {exc!r}")
            continue
        seen.append(f"{port} ({role}): {found} of them, {node.dbsize()} keys")
        if role == "slave":
            seen[-1] += f", replicating {node.info('replication').get('master_port')}"
    return "; ".join(seen)


@contextmanager
def sending(url: str) -> Iterator[Senders]:
    """``Senders`` of ``url``, started, each past its first few sends; stopped when the block ends."""
    senders = Senders(url)
    senders.start()
    try:
        wait_until(lambda: all(len(s.sends) >= 5 for s in senders.all), 30, "every producer to send")
        yield senders
    finally:
        senders.finish()
