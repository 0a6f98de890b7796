"""The processes one fault scenario owns: a private Redis, a proxy per client, the workers.

The Redis server and its helpers are the chaos suite's (``tests/chaos/procs.py``:
a foreground ``redis-server`` on a free loopback port, AOF on); each worker
and the producer reach it only through their own ``FaultProxy``, so a fault
can be aimed at one of them. Workers may run under libfaketime with their
wall clock shifted (``skew``), found at run time.

With ``sentinel=True`` the jobs live on a Sentinel set instead (the scaled
suite's ``SentinelSet``: a master, a replica, three sentinels) and every
client, workers and producer, reaches it by ``redis+sentinel://`` with no
proxy: the sentinels hand out the data nodes' own addresses, so a proxy
could not stay in front of them, and the fault is the failover itself. The
private Redis then only records the runs and hooks (``FAULT_SIDE``), so a
record is never lost with the master it describes.
"""

from __future__ import annotations

import glob
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import redis
import redis.sentinel

from taskforge import TaskForge
from taskforge.broker.scripts import script_source

from ..chaos.procs import RedisServer, kill_group, wait_for
from ..scaled.servers import HOST, SentinelSet, client
from .proxy import FaultProxy

HERE = Path(__file__).parent
FAKETIME_GLOBS = (
    "/usr/lib/*/faketime/libfaketime.so.1",
    "/usr/lib/faketime/libfaketime.so.1",
    "/usr/lib*/libfaketime.so.1",
)


def faketime_library() -> str | None:
    """libfaketime's preload library (Debian: ``apt-get install libfaketime``), or None."""
    for pattern in FAKETIME_GLOBS:
        found = sorted(glob.glob(pattern))
        if found:
            return found[0]
    return None


def script_words(*names: str) -> dict[bytes, str]:
    """The SHA of each named queue script, as the proxy sees it in an EVALSHA, -> its name."""
    return {hashlib.sha1(script_source(name).encode()).hexdigest().encode(): name for name in names}


class FaultRedis(RedisServer):
    """The chaos suite's private Redis, with the AOF fsync policy a scenario asks for (or no AOF)."""

    def __init__(self, directory: Path, fsync: str | None = "always") -> None:
        super().__init__(directory)
        self.fsync = fsync

    def command(self) -> list[str]:
        argv = super().command()
        if self.fsync is None:
            argv[argv.index("--appendonly") + 1] = "no"
        else:
            argv[argv.index("--appendfsync") + 1] = self.fsync
        return argv


class FaultWorker:
    """One ``taskforge worker faultapp:app`` behind its own proxy, maybe with a shifted clock."""

    def __init__(self, rig: Rig, number: int, args: list[str], skew: str | None, env: dict[str, str]) -> None:
        self.number = number
        self.name = f"w{number}"
        self.proxy = FaultProxy(rig.redis.port, rig.seed * 100 + number, self.name)
        self.log_path = rig.dir / f"{self.name}.log"
        environ = {
            **os.environ,
            "TASKFORGE_BROKER_URL": rig.broker_url or self.proxy.url,
            "FAULT_SIDE": rig.redis.url,
            "FAULT_WORKER": self.name,
            "FAULT_DURABILITY": rig.durability,
            "PYTHONUNBUFFERED": "1",
            **env,
        }
        if skew:
            library = faketime_library()
            if library is None:
                raise RuntimeError("libfaketime is not installed: apt-get install faketime libfaketime")
            # FORCE_MONOTONIC_FIX: without it, Python 3.11+ sleeps (clock_nanosleep) fail or hang.
            environ.update(LD_PRELOAD=library, FAKETIME=skew, FAKETIME_FORCE_MONOTONIC_FIX="1")
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "taskforge", "worker", "faultapp:app", *args],
                cwd=rig.dir,
                env=environ,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self, timeout: float = 20) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                pass
        kill_group(self.proc.pid)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        self.proxy.close()


class Rig:
    """A private Redis, workers and a producer app, each client behind its own proxy; ``close()`` ends all."""

    def __init__(
        self, seed: int, fsync: str | None = "always", durability: str = "async", sentinel: bool = False
    ) -> None:
        self.seed = seed
        self.durability = durability
        self.dir = Path(tempfile.mkdtemp(prefix="taskforge-faults-"))
        shutil.copy(HERE / "faultapp.py", self.dir / "faultapp.py")
        self.redis = FaultRedis(self.dir, fsync)
        self.redis.start()
        self.side = redis.Redis(host="127.0.0.1", port=self.redis.port, socket_timeout=10)
        self.sentinels: SentinelSet | None = None
        self.broker_url: str | None = None  # None: each client through its own proxy
        self.data = self.side  # where the jobs live (the master of the Sentinel set, with one)
        if sentinel:
            self.sentinels = SentinelSet()
            self.broker_url = self.sentinels.url
            self.data = redis.sentinel.Sentinel(
                [(HOST, p) for p in self.sentinels.sentinels], sentinel_kwargs={"socket_timeout": 2}
            ).master_for(SentinelSet.SERVICE, socket_timeout=5, socket_connect_timeout=2)
        self.workers: list[FaultWorker] = []
        self.crashes: list[tuple[float, float]] = []
        self.cuts = 2  # partitions per partition scenario
        self.cut_mid_job = 0  # partitions made while worker 1 ran a job (the scenario tested something)
        self.listed_ms = 0
        self.producer_proxy = FaultProxy(self.redis.port, seed * 100, "producer")
        self.producer = TaskForge("faultapp", self.broker_url or self.producer_proxy.url, durability=durability)
        self.tasks: dict[str, Any] = {}
        for name in ("work", "awork", "add"):
            self.tasks[name] = self.producer.task(name=f"faultapp.{name}", max_attempts=20, backoff=0.2)(_stub)

    def add_replica(self) -> None:
        """A replica of the private Redis, synced, so ``durability="replicated"`` writes are confirmed."""
        self.replica = FaultRedis(self.dir / "replica", self.redis.fsync)
        self.replica.dir.mkdir()
        self.replica.command = lambda: [
            *FaultRedis.command(self.replica),
            "--replicaof",
            "127.0.0.1",
            str(self.redis.port),
        ]  # type: ignore[method-assign]
        self.replica.start()
        wait_for(
            lambda: self.replica.client.info("replication").get("master_link_status") == "up", 30, "the replica to sync"
        )

    def worker(self, *args: str, skew: str | None = None, **env: str) -> FaultWorker:
        worker = FaultWorker(self, len(self.workers) + 1, list(args), skew, env)
        self.workers.append(worker)
        return worker

    def wait_listed(self, n: int, timeout: float = 30) -> None:
        """Until ``n`` workers have announced themselves (their first heartbeat)."""
        wait_for(lambda: self.data.zcard("taskforge:workers") >= n, timeout, f"{n} workers listed")
        self.listed_ms = self.redis_ms()  # ticks before this are start-up catch-ups, late by design

    def runs_a_job(self, index: int, within_ms: int = 150) -> bool:
        """Whether worker ``index`` started a job in the last ``within_ms``: a running job whose
        claim token has its owner prefix. Runs last 0.3 s or more, so a cut made now finds
        that job still running, its acknowledgement not yet sent."""
        from taskforge.broker.keys import QueueKeys
        from taskforge.broker.workers import live_workers

        pid = self.workers[index].proc.pid
        owners = [w["owner"] for w in live_workers(self.data) if w.get("pid") == pid and w.get("owner")]
        if not owners:
            return False
        keys = QueueKeys("default")
        seconds, micros = self.data.time()
        now_ms = int(seconds) * 1000 + int(micros) // 1000
        for job_id in [m.decode() for m in self.data.zrange(keys.running, 0, -1)]:
            token, started = self.data.hmget(keys.job(job_id), "token", "started_at")
            if token and token.decode().startswith(owners[0]) and started and now_ms - int(started) < within_ms:
                return True
        return False

    def crash_redis(self) -> None:
        """SIGKILL the private Redis and start it again on the same port, from its AOF."""
        start = time.time()
        self.redis.kill()
        self.redis.start()
        self.crashes.append((start, time.time()))

    def fail_over(self) -> str:
        """SIGKILL the Sentinel set's master; once the sentinels promote the replica, the old
        master comes back as the new one's replica (synced), so the set has a spare again."""
        sentinels = self.sentinels
        assert sentinels is not None
        heir = sentinels.standby()
        victim = sentinels.current_master()
        start = time.time()
        sentinels.kill(victim)
        wait_for(lambda: sentinels.current_master() == heir, 30, "the sentinels to promote the replica", 0.05)
        promoted = time.time() - start
        sentinels.restart(victim, "--replicaof", HOST, str(heir))
        wait_for(
            lambda: client(victim).info("replication").get("master_link_status") == "up",
            30,
            "the old master to replicate from the new one",
        )
        self.crashes.append((start, time.time()))
        return f"master SIGKILLed, replica promoted in {promoted:.1f} s, old master back as its replica"

    def faulted(self, start: float, end: float) -> str | None:
        """'crash' if a Redis crash overlaps [start, end] (plus the lease it takes to notice)."""
        for down, up in self.crashes:
            if down <= end and start <= up + 5:
                return "crash"
        return None

    def redis_ms(self) -> int:
        seconds, micros = self.side.time()
        return int(seconds) * 1000 + int(micros) // 1000

    def close(self) -> None:
        for worker in self.workers:
            worker.stop(timeout=5)
        self.producer_proxy.close()
        self.side.close()
        self.redis.cleanup()
        if self.sentinels is not None:
            self.sentinels.stop()
        if getattr(self, "replica", None) is not None:
            self.replica.cleanup()
        if not os.environ.get("FAULTS_KEEP"):  # FAULTS_KEEP=1 keeps the logs for a look
            shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> Rig:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _stub(*args: Any) -> None:
    """The producer only sends: the workers run faultapp's real tasks."""
    raise AssertionError("the producer never runs a task")


def settle(predicate: Any, timeout: float, what: str) -> Any:
    return wait_for(predicate, timeout, what, interval=0.1)


def elapsed_since(start: float) -> float:
    return time.monotonic() - start
