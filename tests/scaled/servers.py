"""Real Redis Clusters and Sentinel sets on loopback ports, for the scaling-out tests.

Every server is a foreground ``redis-server`` child of the test process, so a
test can SIGKILL a master for real and ``stop()`` can always clean up. Ports
are picked free at start (for a cluster node, its bus port too), so several
suites can run on one machine at once.
"""

from __future__ import annotations

import random
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import redis

HOST = "127.0.0.1"
NODE_TIMEOUT_MS = 1000  # cluster-node-timeout and down-after-milliseconds: failovers within seconds
BUS_OFFSET = 10000  # a cluster node's bus listens on port + 10000 (Redis 6 has no --cluster-port)


def free_ports(n: int) -> list[int]:
    """``n`` distinct ports nobody listens on (held open together, so no duplicates)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind((HOST, 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def free_bus_ports(n: int) -> list[int]:
    """``n`` free ports whose cluster bus port (port + 10000) is free too."""
    ports: list[int] = []
    rng = random.Random()
    while len(ports) < n:
        port = rng.randrange(20000, 30000)
        if port in ports:
            continue
        socks = []
        try:
            for candidate in (port, port + BUS_OFFSET):
                s = socket.socket()
                socks.append(s)
                s.bind((HOST, candidate))
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
        ports.append(port)
    return ports


def wait_until(predicate: Callable[[], object], timeout: float, what: str) -> object:
    deadline = time.monotonic() + timeout
    last: BaseException | None = None
    while time.monotonic() < deadline:
        try:
            value = predicate()
            if value:
                return value
        except (redis.RedisError, OSError) as exc:
            last = exc
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout} s waiting for {what} (last error: {last})")


def client(port: int) -> redis.Redis:
    return redis.Redis(HOST, port, socket_timeout=5, socket_connect_timeout=2)


class Servers:
    """redis-server processes by port, in one temp directory removed by ``stop``."""

    def __init__(self, name: str) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix=f"taskforge-{name}-"))
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        self.argv: dict[int, list[str]] = {}

    def start(self, port: int, args: list[str]) -> None:
        home = self.dir / str(port)
        home.mkdir(exist_ok=True)
        argv = ["redis-server", *args]
        self.argv[port] = argv
        log = (home / "log").open("ab")
        self.procs[port] = subprocess.Popen(argv, cwd=home, stdout=log, stderr=subprocess.STDOUT)
        log.close()

    def wait_up(self, port: int) -> None:
        wait_until(lambda: client(port).ping(), 20, f"redis-server on port {port}")

    def kill(self, port: int) -> None:
        """SIGKILL: no shutdown, no goodbye to replicas or the cluster bus."""
        proc = self.procs[port]
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)

    def restart(self, port: int, *extra: str) -> None:
        """Start a killed server again with its first arguments (and ``extra`` ones)."""
        args = self.argv[port][1:]
        self.start(port, [*args, *extra])
        self.argv[port] = ["redis-server", *args]
        self.wait_up(port)

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
        for proc in self.procs.values():
            proc.wait(timeout=10)
        shutil.rmtree(self.dir, ignore_errors=True)


class Cluster(Servers):
    """Three masters, each with ``replicas`` replicas (1 for the tests): ``redis-cli --cluster create``."""

    def __init__(self, replicas: int = 1) -> None:
        super().__init__("cluster")
        self.ports = free_bus_ports(3 * (1 + replicas))
        for port in self.ports:
            self.start(
                port,
                [
                    "--port",
                    str(port),
                    "--bind",
                    HOST,
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    "nodes.conf",
                    "--cluster-node-timeout",
                    str(NODE_TIMEOUT_MS),
                    "--cluster-replica-validity-factor",
                    "0",
                    "--repl-diskless-sync-delay",
                    "0",
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                ],
            )
        for port in self.ports:
            self.wait_up(port)
        subprocess.run(
            [
                "redis-cli",
                "--cluster",
                "create",
                *(f"{HOST}:{p}" for p in self.ports),
                "--cluster-replicas",
                str(replicas),
                "--cluster-yes",
            ],
            check=True,
            capture_output=True,
            timeout=60,
        )
        wait_until(self.healthy, 60, "the cluster to cover every slot with a synced replica per master")

    @property
    def url(self) -> str:
        return "redis+cluster://" + ",".join(f"{HOST}:{p}" for p in self.ports[:2])

    def healthy(self) -> bool:
        alive = [p for p, proc in self.procs.items() if proc.poll() is None]
        for port in alive:
            info = client(port).cluster("info")
            if info["cluster_state"] != "ok" or int(info["cluster_known_nodes"]) != len(self.ports):
                return False
        masters = self.masters()
        if len(masters) != 3:
            return False
        return all(
            client(p).info("replication")["role"] == "master"
            or client(p).info("replication").get("master_link_status") == "up"
            for p in alive
        )

    def masters(self) -> list[int]:
        """Ports of the nodes serving slots now, by the first live node's view."""
        for port, proc in self.procs.items():
            if proc.poll() is None:
                return sorted({int(entry[2][1]) for entry in client(port).execute_command("CLUSTER SLOTS")})
        return []

    def master_of(self, key: str) -> int:
        slot = client(self.masters()[0]).cluster("keyslot", key)
        for start, end, master, *_ in client(self.masters()[0]).execute_command("CLUSTER SLOTS"):
            if start <= slot <= end:
                return int(master[1])
        raise AssertionError(f"no master serves the slot of {key!r}")


class SentinelSet(Servers):
    """One master, one replica, three sentinels watching service ``SERVICE``."""

    SERVICE = "taskforge"

    def __init__(self) -> None:
        super().__init__("sentinel")
        self.master, self.replica, *self.sentinels = free_ports(5)
        common = ["--bind", HOST, "--save", "", "--appendonly", "no", "--repl-diskless-sync-delay", "0"]
        self.start(self.master, ["--port", str(self.master), *common])
        self.start(self.replica, ["--port", str(self.replica), "--replicaof", HOST, str(self.master), *common])
        # Each sentinel is told the others and the replica up front: found by
        # itself, that takes a hello period and an INFO period (10 s).
        ids = {port: f"{port:040x}" for port in self.sentinels}
        for port in self.sentinels:
            conf = self.dir / f"sentinel-{port}.conf"
            others = "".join(
                f"sentinel known-sentinel {self.SERVICE} {HOST} {p} {ids[p]}\n" for p in self.sentinels if p != port
            )
            conf.write_text(
                f"port {port}\nbind {HOST}\nsentinel myid {ids[port]}\n"
                f"sentinel monitor {self.SERVICE} {HOST} {self.master} 2\n"
                f"sentinel down-after-milliseconds {self.SERVICE} {NODE_TIMEOUT_MS}\n"
                f"sentinel failover-timeout {self.SERVICE} 10000\n"
                f"sentinel known-replica {self.SERVICE} {HOST} {self.replica}\n{others}"
            )
            self.start(port, [str(conf), "--sentinel"])
        for port in [self.master, self.replica, *self.sentinels]:
            self.wait_up(port)
        wait_until(self.healthy, 60, "three sentinels that see each other and the synced replica")

    @property
    def data_nodes(self) -> list[int]:
        """The master and the replica, whichever is which now."""
        return [self.master, self.replica]

    @property
    def url(self) -> str:
        return "redis+sentinel://" + ",".join(f"{HOST}:{p}" for p in self.sentinels) + f"/{self.SERVICE}"

    def healthy(self) -> bool:
        for port in self.sentinels:
            c = client(port)
            if len(c.execute_command("SENTINEL", "SENTINELS", self.SERVICE)) != 2:
                return False
            replicas = c.execute_command("SENTINEL", "REPLICAS", self.SERVICE)
            if not replicas or any(b"s_down" in r[r.index(b"flags") + 1] for r in map(list, replicas)):
                return False
        master = self.current_master()
        replicas = [p for p in (self.master, self.replica) if p != master and self.procs[p].poll() is None]
        return all(client(p).info("replication").get("master_link_status") == "up" for p in replicas)

    def standby(self) -> int:
        """The data node that is not the master now (the first replica until a failover swaps them).

        The set lives for the whole run and each failover test swaps the two,
        so a test asks which is which once the set is whole again.
        """
        wait_until(self.healthy, 60, "three sentinels that see each other and the synced replica")
        return self.replica if self.current_master() == self.master else self.master

    def current_master(self) -> int:
        """The master's port, as every sentinel agrees (AssertionError-free: 0 while they disagree)."""
        answers = {
            int(client(p).execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", self.SERVICE)[1])
            for p in self.sentinels
        }
        return answers.pop() if len(answers) == 1 else 0
